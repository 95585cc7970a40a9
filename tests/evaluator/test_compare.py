from __future__ import annotations

import math

import pytest
import torch

from evaluator.judge.compare import ForeignValue, compare
from problems.spec import Tolerance

TOL = Tolerance(atol=1e-3, rtol=1e-2)
EXACT = Tolerance(atol=0.0, rtol=0.0)


def test_equal_tensors_pass_with_zero_error():
    x = torch.randn(100)
    verdict = compare(x, x.clone(), TOL)
    assert verdict.ok and verdict.max_abs_err == 0.0 and verdict.message == ""


def test_integers_are_compared_exactly_whatever_the_tolerance():
    expected = torch.tensor([1, 2, 3, 2**60 + 1], dtype=torch.int64)
    assert compare(expected, expected.clone(), Tolerance(atol=10, rtol=1)).ok
    actual = expected.clone()
    actual[3] = 2**60  # equal in float64, different as integers
    verdict = compare(expected, actual, Tolerance(atol=10, rtol=1))
    assert not verdict.ok
    assert "1 of 4 elements differ; worst at index [3]" in verdict.message


def test_bools_are_compared_exactly():
    expected = torch.tensor([True, False])
    assert not compare(expected, torch.tensor([True, True]), TOL).ok


def test_an_element_exactly_at_the_tolerance_edge_passes():
    tol = Tolerance(atol=0.5, rtol=0.25)  # binary fractions: the edge is exact
    expected = torch.tensor([4.0, -4.0])
    assert compare(expected, torch.tensor([5.5, -5.5]), tol).ok
    assert not compare(expected, torch.tensor([5.5, -5.5 - 2**-20]), tol).ok


def test_the_message_names_the_worst_element_and_the_tolerance():
    expected = torch.zeros(2, 3)
    actual = expected.clone()
    actual[1, 2] = 0.5
    actual[0, 0] = 0.1
    verdict = compare(expected, actual, TOL)
    assert not verdict.ok
    assert verdict.message == (
        "output 0: 2 of 6 elements differ; worst at index [1, 2]: got 0.5, expected 0 "
        "(abs err 0.5, rel err 0 as |expected| <= atol; atol 0.001, rtol 0.01)"
    )
    assert verdict.max_abs_err == 0.5


def test_nan_in_the_candidate_never_passes():
    expected = torch.ones(4)
    actual = expected.clone()
    actual[2] = math.nan
    verdict = compare(expected, actual, Tolerance(atol=math.inf, rtol=0))
    assert not verdict.ok
    assert "worst at index [2]: got nan, expected 1" in verdict.message


def test_inf_in_the_candidate_never_passes():
    expected = torch.ones(4)
    actual = expected.clone()
    actual[0] = math.inf
    assert not compare(expected, actual, TOL).ok


def test_nan_where_the_reference_has_nan_passes():
    expected = torch.tensor([math.nan, math.inf, 1.0])
    assert compare(expected, expected.clone(), TOL).ok
    assert not compare(expected, torch.tensor([0.0, math.inf, 1.0]), TOL).ok


def test_exact_tolerance_on_floats_means_bit_equal():
    expected = torch.tensor([1.0, 2.0], dtype=torch.bfloat16)
    actual = torch.tensor([1.0, 2.015625], dtype=torch.bfloat16)
    assert not compare(expected, actual, EXACT).ok


@pytest.mark.parametrize(
    ("actual", "message"),
    [
        (torch.zeros(4), "output 0: shape (4,) but the reference's is (8,)"),
        (
            torch.zeros(8, dtype=torch.float64),
            "output 0: dtype float64 but the reference's is float32",
        ),
        ((torch.zeros(8),), "output: expected a Tensor, got a tuple of 1"),
        (ForeignValue("NoneType"), "output: expected a Tensor, got NoneType"),
    ],
)
def test_mismatches_have_clear_messages(actual, message):
    verdict = compare(torch.zeros(8), actual, TOL)
    assert not verdict.ok and verdict.message == message


def test_output_count_must_match():
    expected = (torch.zeros(2), torch.zeros(3))
    verdict = compare(expected, [torch.zeros(2)], TOL)
    assert verdict.message == "1 outputs but the reference returns 2"
    verdict = compare(expected, (torch.zeros(2), torch.ones(3)), TOL)
    assert verdict.message.startswith("output 1: 3 of 3 elements differ")


def test_relative_error_is_reported_only_where_values_exceed_atol():
    # A passing bf16-style sum whose expected value is near zero: the absolute tolerance
    # governs there, so the summary must not report a relative error of several units.
    expected = torch.tensor([0.008, 2.0, -3.0], dtype=torch.float64)
    actual = torch.tensor([0.04, 2.01, -3.0], dtype=torch.float64)
    verdict = compare(expected, actual, Tolerance(atol=0.125, rtol=0.02))
    assert verdict.ok
    assert verdict.max_rel_err == pytest.approx(0.005)
    assert verdict.max_abs_err == pytest.approx(0.032)


def test_a_wrong_answer_reports_the_errors_of_the_element_its_message_names():
    # The worst element by absolute error is not the one with the largest relative error:
    # the verdict's errors are the named element's, so the message and the result's
    # columns say one pair of numbers (docs/architecture.md, "Errors").
    expected = torch.tensor([100.0, 1.0], dtype=torch.float64)
    actual = torch.tensor([110.0, 1.5], dtype=torch.float64)
    verdict = compare(expected, actual, Tolerance(atol=0.001, rtol=0.01))
    assert not verdict.ok
    assert (verdict.max_abs_err, verdict.max_rel_err) == pytest.approx((10.0, 0.1))
    assert verdict.message == (
        "output 0: 2 of 2 elements differ; worst at index [0]: got 110, expected 100 "
        "(abs err 10, rel err 0.1; atol 0.001, rtol 0.01)"
    )
