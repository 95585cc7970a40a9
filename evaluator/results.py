"""What a host reports of each problem it judged: statuses, flags and the results.

A `ProblemResult` (with its `CaseResult`s) travels in the progress and finished messages of
evaluator/contract.py, which re-exports every public name of this module, and the portal
records it. The text in it comes from bundle code, so messages and logs leave the host
through `printable` and `cap_log`.
"""

from __future__ import annotations

import enum
from dataclasses import asdict, dataclass, field, fields
from typing import Any

LOG_CAP_BYTES = 16 * 1024


# Defined here, not in evaluator/contract.py, because reading a result raises it and the
# contract imports this module (not the other way round).
class ContractError(ValueError):
    """A message that does not follow the contract."""


class ProblemStatus(enum.StrEnum):
    PASSED = "passed"
    WRONG_ANSWER = "wrong_answer"
    RUNTIME_ERROR = "runtime_error"
    TIMEOUT = "timeout"
    COMPILE_ERROR = "compile_error"
    NOT_RUN = "not_run"


class ResultFlag(enum.StrEnum):
    """Why a result that passed must not be trusted; a flagged result is kept off rankings."""

    BELOW_FLOOR = "below_floor"  # faster than the links can physically move its bytes
    # Bundle code replaced the runner's clocks, copies or pipe methods in its process, or
    # wrote on the judge's pipe what no runner writes (docs/security.md).
    TAMPERED = "tampered"
    # Results judged before 2026-11-25 only: rank processes reported shorter times than
    # the parent's clock allowed. Since then the judge's own clock is the only one.
    CLOCK_MISMATCH = "clock_mismatch"


# Control characters but newline and tab, C1 controls included: a message or log from bundle
# code must not drive a terminal (pkb prints them) or hide text on a page.
_UNPRINTABLE: dict[int, str | None] = {
    c: "?" for c in [*range(0x00, 0x09), *range(0x0B, 0x20), *range(0x7F, 0xA0)]
}
_UNPRINTABLE[0x0D] = None


def printable(text: str) -> str:
    """`text` with terminal escapes and other control characters made harmless."""
    return text.translate(_UNPRINTABLE)


# OWASP's rule against CSV injection: a spreadsheet reads a cell that starts with one of
# these as a formula (tab and carriage return too, before it strips them), so every text
# cell of every CSV the project writes starts with a quote instead (the profile run's
# summary.csv here, the results dataset in portal/entries/export.py).
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def spreadsheet_safe(text: str) -> str:
    """A CSV cell no spreadsheet runs: `'=1+2` for `=1+2`, other text unchanged."""
    return "'" + text if text.startswith(FORMULA_STARTS) else text


def cap_log(text: str, limit: int = LOG_CAP_BYTES) -> str:
    """Keep the head and the tail of a long log: the first error and the last words."""
    data = text.encode("utf-8", "replace")
    if len(data) <= limit:
        return text
    half = limit // 2
    head = data[:half].decode("utf-8", "ignore")
    tail = data[-half:].decode("utf-8", "ignore")
    return f"{head}\n... [{len(data) - 2 * half} bytes cut] ...\n{tail}"


@dataclass
class CaseResult:
    """One case of one problem. Times are microseconds, the slowest rank's per iteration."""

    case: str
    dtype: str
    passed: bool
    time_us: float | None = None  # median
    time_spread_us: float | None = None  # interquartile range
    iterations: int = 0
    ref_time_us: float | None = None
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    bytes_moved: int = 0
    # The roofline: bytes_moved over the host's measured peer bandwidth is the floor, the
    # fastest time the links allow; roofline = floor / time (1.0 = at the physical limit).
    floor_us: float | None = None
    roofline: float | None = None
    # Reference and candidate timed in pairs of rounds within this evaluation (A B, B A, ...):
    # `speedup` is the median of the per-round ratios reference_us / candidate_us and
    # speedup_low..speedup_high its distribution-free confidence interval (judge/stats.py).
    # Absent (None, []) in results written before contract 1 carried them.
    speedup: float | None = None
    speedup_low: float | None = None
    speedup_high: float | None = None
    # Per pair: reference_us, candidate_us (net of harness_us), the gross times, tare_us
    # and which side went "first".
    rounds: list[dict[str, Any]] = field(default_factory=list)
    # Pairs counted, and whether the interval's half-width came within the host's target
    # (False: the pairs ran out first, at the host's cap or the problem's time); None in
    # results written before the number of pairs adapted (2026-11-25).
    pairs: int = 0
    settled: bool | None = None

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> CaseResult:
        return cls(**known_fields(cls, data))


@dataclass
class ProblemResult:
    slug: str
    status: ProblemStatus
    world_size: int
    message: str = ""
    log: str = ""
    time_us: float | None = None  # sum over cases of the median times
    ref_time_us: float | None = None
    speedup: float | None = None  # geometric mean over cases of ref/candidate
    # The geometric means over cases of the cases' interval ends (judge/problem_run.py says
    # why, in `_summarize`).
    speedup_low: float | None = None
    speedup_high: float | None = None
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    roofline: float | None = None  # mean over cases of floor / time
    flags: list[str] = field(default_factory=list)  # ResultFlag values
    cases: list[CaseResult] = field(default_factory=list)
    # The precheck's findings in the problem's code (evaluator/intake/precheck.py), each
    # {"rule", "path", "line", "text"}: the portal keeps a result with any under review, off
    # the boards until an admin clears it. Optional in version 1 (absent from older hosts'
    # results, ignored by older portals). Not a flag here: the host judges the code as any
    # other, and whether a finding may rank is the portal's rule.
    review: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["status"] = str(self.status)
        data["message"] = printable(self.message)
        data["log"] = printable(cap_log(self.log))
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ProblemResult:
        try:
            values = known_fields(cls, data)
            values["status"] = ProblemStatus(values["status"])
            values["cases"] = [CaseResult.from_json(c) for c in values.get("cases", [])]
            values["review"] = read_review(values.get("review", []))
            return cls(**values)
        except (KeyError, TypeError, ValueError) as exc:
            raise ContractError(f"problem result: bad field: {exc}") from exc


REVIEW_CAP = 50


def read_review(value: Any) -> list[dict[str, Any]]:
    """A result's precheck findings as data: at most REVIEW_CAP, each with a rule, a path,
    a line and a text of bounded length, or ValueError."""
    if not isinstance(value, list):
        raise ValueError(f"review: expected a list, got {type(value).__name__}")
    findings = []
    for item in value[:REVIEW_CAP]:
        if not isinstance(item, dict) or not isinstance(item.get("line"), int):
            raise ValueError(f"review: bad finding {item!r:.80}")
        texts = [item.get(k) for k in ("rule", "path", "text")]
        if not all(isinstance(t, str) for t in texts):
            raise ValueError(f"review: bad finding {item!r:.80}")
        rule, path, text = (printable(str(t))[:200] for t in texts)
        findings.append({"rule": rule, "path": path, "line": item["line"], "text": text})
    return findings


def known_fields(cls: type, data: Any) -> dict[str, Any]:
    """The fields of `data` that `cls` has: a newer writer of version 1 may add others."""
    if not isinstance(data, dict):
        raise TypeError(f"expected a JSON object, got {type(data).__name__}")
    names = {f.name for f in fields(cls)}
    return {k: v for k, v in data.items() if k in names}
