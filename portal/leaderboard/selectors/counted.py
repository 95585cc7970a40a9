"""Which result counts per team and problem, and its pooled numbers.

Per (team, problem), and per (example label, problem): the newest passed, unflagged result
at the problem's current version counts (its submission is the newest by creation: the
team's newest code), with its numbers pooled over every passed, unflagged run of the same
code (`ProblemResult.code_digest`) by the same team on that problem and version, its
re-runs (ResultRun) included: the speedup, both interval ends, the times and the roofline
fraction are the medians over the pool's runs. portal/leaderboard/scoring.py says why.

A result without a digest (recorded before digests were) pools with no other.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import NamedTuple

from django.db.models import Case, CharField, F, QuerySet, Value, When, Window
from django.db.models.functions import Cast, Concat, FirstValue

from portal.leaderboard.scoring import Solved
from portal.submissions.models import ProblemResult, ResultRun

# One judged run's numbers, in this order.
NUMBERS = ("speedup", "speedup_low", "speedup_high", "roofline", "time_us", "ref_time_us")
Draw = tuple[float | None, ...]


class Counted(NamedTuple):
    """The counted result of a team (or an example label) on one problem. A named tuple,
    for the same reason as `Solved`."""

    team_id: int | None  # None for an example's
    label: str  # the example's label; empty for a team's
    team_name: str
    team_slug: str
    problem_id: int
    category: str
    weight: float
    speedup: float | None
    speedup_low: float | None
    speedup_high: float | None
    roofline: float | None
    time_us: float | None
    ref_time_us: float | None
    run_count: int  # runs in the pool
    submission_id: int  # the newest submission of the code
    reached_at: datetime | None  # when the code's first judged submission finished

    @property
    def solved(self) -> Solved:
        return Solved(self.speedup, self.weight, self.roofline, self.speedup_low, self.speedup_high)

    @property
    def group(self) -> int | str:
        """The team's id, or the example's label."""
        return self.label if self.team_id is None else self.team_id


def _median(values: Iterable[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def pooled(draws: Sequence[Draw]) -> Draw:
    """The medians of the runs' numbers (NUMBERS order). A run without an interval counts
    its speedup for both ends, as a re-run's envelope does; a pool with no interval at all
    has none (a result of an older host, counted by its speedup)."""
    if len(draws) == 1:
        return draws[0]
    speedups = [d[0] for d in draws]
    has_interval = any(d[1] is not None for d in draws)
    lows = [d[1] if d[1] is not None else d[0] for d in draws]
    highs = [d[2] if d[2] is not None else d[0] for d in draws]
    return (
        _median(speedups),
        _median(lows) if has_interval else None,
        _median(highs) if has_interval else None,
        *(_median(d[i] for d in draws) for i in range(3, len(NUMBERS))),
    )


def _group_expressions() -> dict:
    # An example's results are grouped by its label, whoever submitted it: the team is
    # NULL for them, the label empty for teams'.
    return {
        "pool_team": Case(When(submission__example_label="", then=F("submission__team_id"))),
        "pool_label": F("submission__example_label"),
        "pool_code": Case(
            When(
                code_digest="",
                then=Concat(Value("#"), Cast("submission_id", CharField())),
            ),
            default=F("code_digest"),
            output_field=CharField(),
        ),
    }


def _newest_code_pools(results: QuerySet) -> QuerySet:
    """The rows of `results` in the pool of their group's newest code, with the id of that
    newest submission; one query."""
    groups = _group_expressions()

    def newest(expression) -> Window:
        return Window(
            FirstValue(expression),
            partition_by=[groups["pool_team"], groups["pool_label"], F("problem_id")],
            order_by=[F("submission__created_at").desc(), F("submission_id").desc()],
        )

    return results.annotate(
        **groups, newest_code=newest(groups["pool_code"]), newest_id=newest(F("submission_id"))
    ).filter(pool_code=F("newest_code"))


_COLUMNS = (
    "id",
    "pool_team",
    "pool_label",
    "submission__team__name",
    "submission__team__slug",
    "problem_id",
    "problem__category",
    "problem__weight",
    "run_count",
    "newest_id",
    "submission__finished_at",
    *NUMBERS,
)


def runs_of(result_ids: list[int]) -> dict[int, list[Draw]]:
    """The passed, unflagged runs at their result's version of results with several."""
    runs = (
        ResultRun.objects.filter(
            result_id__in=result_ids,
            problem_version=F("result__problem_version"),
            status=ProblemResult.Status.PASSED,
            flags=[],
        )
        .order_by("result_id", "judged_at", "id")
        .values_list("result_id", *NUMBERS)
    )
    found: dict[int, list[Draw]] = defaultdict(list)
    for result_id, *numbers in runs:
        found[result_id].append(tuple(numbers))
    return found


def code_key(digest: str, submission_id: int) -> str:
    """What a result pools by, as `_group_expressions` says it in SQL: its code's digest,
    or its own submission's where it has none."""
    return digest or f"#{submission_id}"


def draws_of(result_id: int, own: Draw, run_count: int, runs: dict[int, list[Draw]]) -> list[Draw]:
    """A result's runs: its re-runs' where it has some (`runs_of`), else its own numbers
    (one run, or runs recorded before runs were kept)."""
    found = runs.get(result_id) if run_count > 1 else None
    return list(found) if found else [own]


def counted_results(results: QuerySet) -> list[Counted]:
    """The counted result of every group in `results` (passed, unflagged, judged ones),
    one query, and one more when some result of a pool was re-run."""
    rows = list(_newest_code_pools(results).values_list(*_COLUMNS))
    rerun = [row[0] for row in rows if row[8] > 1]
    runs = runs_of(rerun) if rerun else {}
    pools: dict[tuple, list[tuple]] = defaultdict(list)
    for row in rows:
        pools[(row[1], row[2], row[5])].append(row)
    counted = []
    for members in pools.values():
        first = members[0]
        team_id, label, name, slug, problem_id, category, weight, run_count, newest = first[1:10]
        if len(members) == 1 and run_count <= 1:  # most pools: one result judged once
            numbers, runs_in_pool, reached_at = first[11:], 1, first[10]
        else:
            draws = [d for row in members for d in draws_of(row[0], row[11:], row[8], runs)]
            numbers, runs_in_pool = pooled(draws), len(draws)
            # The pool reached the board when its code first finished judging: more draws
            # of the same code later do not make the team a later arrival in a tie.
            reached_at = min((row[10] for row in members if row[10] is not None), default=None)
        speedup, low, high, roofline, time_us, ref_time_us = numbers
        counted.append(
            Counted(
                team_id,
                label,
                name if team_id is not None else label,
                slug if team_id is not None else "",
                problem_id,
                category,
                weight,
                speedup,
                low,
                high,
                roofline,
                time_us,
                ref_time_us,
                runs_in_pool,
                newest,
                reached_at,
            )
        )
    return counted


def counted_query(*, profile: str, problem_ids: list[int] | None = None) -> QuerySet:
    """The results that may count on a board of the profile, teams' and examples'."""
    results = ProblemResult.objects.judged(profile=profile).passed().unflagged()
    if problem_ids is not None:
        results = results.filter(problem_id__in=problem_ids)
    return results
