"""Compares a candidate's outputs with the reference's, element by element.

An element passes when |actual - expected| <= atol + rtol * |expected|. Integer and bool
outputs are compared exactly whatever the tolerance; NaN or Inf in the candidate where the
reference is finite never passes; where the reference itself is NaN or Inf the candidate
must match it.

Errors, as every place that shows them means them (docs/architecture.md, "Errors"): an
element's absolute error is |actual - expected|; its relative error is that over |expected|
where |expected| is above atol, and 0 elsewhere (nearer zero only atol applies). A pass
reports the largest of each over the elements compared; a wrong answer those of the one
element its message names (the failing element furthest from its expected value).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch

from problems.spec import Tolerance


@dataclass(frozen=True)
class Verdict:
    ok: bool
    # A pass: the largest of each over the elements compared. A wrong answer: those of the
    # one element its message names. The relative error counts only where |expected| is
    # above atol (`_relative`).
    max_abs_err: float = 0.0
    max_rel_err: float = 0.0
    message: str = ""


@dataclass(frozen=True)
class ForeignValue:
    """Stands for a non-tensor output that crossed a process boundary as its type name."""

    type_name: str


def compare(expected: Any, actual: Any, tol: Tolerance) -> Verdict:
    """Judge `actual` (a Tensor, or a tuple/list of them) against the reference's outputs."""
    if isinstance(expected, torch.Tensor):
        if not isinstance(actual, torch.Tensor):
            return _fail(f"output: expected a Tensor, got {_type_name(actual)}")
        pairs = [(expected, actual)]
    else:
        if not isinstance(actual, (tuple, list)):
            return _fail(
                f"output: expected a tuple of {len(expected)} tensors, got {_type_name(actual)}"
            )
        if len(actual) != len(expected):
            return _fail(f"{len(actual)} outputs but the reference returns {len(expected)}")
        pairs = list(zip(expected, actual, strict=True))

    worst_abs = worst_rel = 0.0
    for i, (exp, act) in enumerate(pairs):
        verdict = _compare_tensor(f"output {i}", exp, act, tol)
        if not verdict.ok:
            return verdict
        worst_abs = max(worst_abs, verdict.max_abs_err)
        worst_rel = max(worst_rel, verdict.max_rel_err)
    return Verdict(ok=True, max_abs_err=worst_abs, max_rel_err=worst_rel)


def _compare_tensor(label: str, expected: Any, actual: Any, tol: Tolerance) -> Verdict:
    if not isinstance(actual, torch.Tensor):
        return _fail(f"{label}: expected a Tensor, got {_type_name(actual)}")
    if tuple(actual.shape) != tuple(expected.shape):
        return _fail(
            f"{label}: shape {tuple(actual.shape)} but the reference's is {tuple(expected.shape)}"
        )
    if actual.dtype != expected.dtype:
        return _fail(
            f"{label}: dtype {_dtype(actual.dtype)} but the reference's is {_dtype(expected.dtype)}"
        )
    actual = actual.detach().to(expected.device)
    expected = expected.detach()
    if expected.is_complex():
        expected, actual = torch.view_as_real(expected), torch.view_as_real(actual)
    if expected.is_floating_point():
        exact = tol.atol == 0.0 and tol.rtol == 0.0
        return _compare_float(label, expected, actual, tol, exact=exact)
    return _compare_exact(label, expected, actual)


def _compare_exact(label: str, expected: torch.Tensor, actual: torch.Tensor) -> Verdict:
    # Compared in the integer domain: int64 values beyond 2**53 would collide in float64.
    bad = actual != expected
    diff = (actual.double() - expected.double()).abs()
    rel = _relative(diff, expected.double())
    return _verdict(label, expected, actual, bad, diff, rel, Tolerance(0.0, 0.0))


def _compare_float(
    label: str, expected: torch.Tensor, actual: torch.Tensor, tol: Tolerance, *, exact: bool
) -> Verdict:
    e64, a64 = expected.double(), actual.double()
    diff = (a64 - e64).abs()
    finite = torch.isfinite(e64)
    within = (diff <= tol.atol + tol.rtol * e64.abs()) & torch.isfinite(a64)
    if exact:
        within = a64 == e64
    same_special = (a64 == e64) | (torch.isnan(a64) & torch.isnan(e64))
    ok = torch.where(finite, within, same_special)
    # Errors where both agree on a NaN/Inf are not errors.
    diff = torch.where(ok & ~finite, torch.zeros_like(diff), diff)
    rel = _relative(diff, e64, above=tol.atol)
    return _verdict(label, expected, actual, ~ok, diff, rel, tol)


def _relative(diff: torch.Tensor, e64: torch.Tensor, *, above: float = 0.0) -> torch.Tensor:
    """|a - e| / |e| where |e| > `above` (the atol), else 0.

    Near zero the absolute tolerance is what applies; dividing there would report a
    relative error of 4.0 for a passing bf16 sum whose value is 0.008 (seen on the site).
    """
    scale = e64.abs()
    return torch.where(scale > above, diff / scale, torch.zeros_like(diff))


def _verdict(
    label: str,
    expected: torch.Tensor,
    actual: torch.Tensor,
    bad: torch.Tensor,
    diff: torch.Tensor,
    rel: torch.Tensor,
    tol: Tolerance,
) -> Verdict:
    max_abs = _nanmax(diff)
    max_rel = _nanmax(rel)
    n_bad = int(bad.sum().item())
    if n_bad == 0:
        return Verdict(ok=True, max_abs_err=max_abs, max_rel_err=max_rel)
    # The worst failing element: NaN counts as infinitely wrong.
    badness = torch.where(bad, torch.nan_to_num(diff, nan=math.inf), torch.full_like(diff, -1))
    flat = int(torch.argmax(badness.reshape(-1)).item())
    index = [int(i) for i in torch.unravel_index(torch.tensor(flat), expected.shape)]
    got, want = actual.reshape(-1)[flat].item(), expected.reshape(-1)[flat].item()
    worst_abs, worst_rel = diff.reshape(-1)[flat].item(), rel.reshape(-1)[flat].item()
    # Where |expected| is within atol the relative error is 0 by definition: say why.
    counted = abs(want) > tol.atol or not math.isfinite(want)
    message = (
        f"{label}: {n_bad} of {expected.numel()} elements differ; worst at index {index}: "
        f"got {_num(got)}, expected {_num(want)} (abs err {_err(worst_abs)}, "
        f"rel err {_err(worst_rel)}{'' if counted else ' as |expected| <= atol'}; "
        f"atol {tol.atol:g}, rtol {tol.rtol:g})"
    )
    # A wrong answer reports the element it names, and only it (docs/architecture.md,
    # "Errors"): the result's columns, its cases' and the message then say one number.
    return Verdict(
        ok=False,
        max_abs_err=math.inf if math.isnan(worst_abs) else worst_abs,
        max_rel_err=math.inf if math.isnan(worst_rel) else worst_rel,
        message=message,
    )


def _nanmax(values: torch.Tensor) -> float:
    if values.numel() == 0:
        return 0.0
    return float(torch.nan_to_num(values, nan=math.inf).max().item())


def _num(value: float | int | bool) -> str:
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def _err(value: float) -> str:
    # Three significant digits, as the site's error columns show them (`error` filter).
    return f"{value:.3g}"


def _dtype(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _type_name(value: Any) -> str:
    if isinstance(value, ForeignValue):
        return value.type_name
    if isinstance(value, (tuple, list)):
        return f"a {type(value).__name__} of {len(value)}"
    return type(value).__name__


def _fail(message: str) -> Verdict:
    return Verdict(ok=False, max_abs_err=math.inf, max_rel_err=math.inf, message=message)
