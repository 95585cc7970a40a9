"""Kept board rows: each group's sums, computed again only where a trigger marked it.

A board of 1,000 teams built from the results took 2.4 s (a window query over 50,000
results, then 33,000 counted results summed in Python); built from kept rows it reads one
row per team. A recorded result marks its team (triggers.py, in the writer's transaction),
and the next build computes that team's rows again before it reads (`refresh`): a new result
costs its team's queries, not the board's. A change of a problem marks every group (its
version, status, weight or hardware may move every team's sums); problems change rarely.

The sums are those `selectors/board.build_leaderboard` computes from the results, in the
same order of additions (results by problem id, categories in the catalog's order), so a
board built from kept rows has the same numbers to the last bit
(tests/portal/leaderboard/test_kept_rows.py compares them).
"""

from __future__ import annotations

import struct
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import astuple
from datetime import UTC, datetime, timedelta
from operator import attrgetter

from django.db import connection, transaction
from django.db.models import Q

from evaluator.face import PROFILES
from portal.leaderboard.models import KeptRow, StaleMark
from portal.leaderboard.scoring import Solved, Totals
from portal.leaderboard.selectors.counted import Counted, counted_query, counted_results
from portal.leaderboard.triggers import MARKS
from portal.problems.models import Category, Problem

# Over this many marked groups one pass over every result is quicker than a query per
# profile listing them (a bulk load marks every team).
MARKED_FOR_ALL = 200
LOCK_KEY = 4_600_046  # PostgreSQL advisory lock of the refresh (any constant of this app's)
CATEGORY_ORDER = [c.value for c in Category]


def refresh() -> None:
    """Compute again the kept rows of every group marked since the last refresh; one query
    when none is."""
    if not StaleMark.objects.exists():
        return
    with transaction.atomic():
        marks = _take_marks()
        if marks:
            _recompute(marks)


def _take_marks() -> set[tuple[int | None, str]]:
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            # Refreshes take turns: two deleting the same marks in different orders could
            # deadlock, and one must not read rows the other is still writing.
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [LOCK_KEY])
        # On SQLite this write is the transaction's first statement, so it waits for the
        # write lock under the busy timeout (a read first would fail to upgrade instead),
        # and a refresh under way makes the next one wait and then find no marks.
        cursor.execute(f"DELETE FROM {MARKS} RETURNING team_id, label")
        return {(team_id, label) for team_id, label in cursor.fetchall()}


def _recompute(marks: set[tuple[int | None, str]]) -> None:
    everything = (None, "") in marks or len(marks) > MARKED_FOR_ALL
    teams = [team for team, _ in marks if team is not None]
    labels = [label for _, label in marks if label]
    kept = KeptRow.objects.all()
    results = Q()
    if not everything:
        kept = kept.filter(Q(team_id__in=teams, label="") | Q(label__in=labels))
        results = Q(submission__team_id__in=teams, submission__example_label="")
        results |= Q(submission__example_label__in=labels)
    kept.delete()
    problems = list(Problem.objects.published().values_list("id", "profiles"))
    rows = []
    for profile in PROFILES:
        in_scope = {pid for pid, where in problems if not where or profile in where}
        counted = counted_results(counted_query(profile=profile).filter(results))
        rows += kept_rows(profile, [c for c in counted if c.problem_id in in_scope])
    KeptRow.objects.bulk_create(rows, batch_size=500)


def kept_rows(profile: str, counted: Iterable[Counted]) -> list[KeptRow]:
    """One row per group of `counted` (a profile's counted results in its scope)."""
    groups: dict[tuple[int | None, str], list[Counted]] = defaultdict(list)
    for entry in counted:
        groups[(entry.team_id, entry.label)].append(entry)
    rows = []
    for (team_id, label), found in groups.items():
        found.sort(key=attrgetter("problem_id"))
        rows.append(
            KeptRow(
                profile=profile,
                team_id=team_id,
                label=label,
                name=found[0].team_name,
                slug=found[0].team_slug,
                totals=_sums(found),
                counted=b"".join(_pack_solved(c.problem_id, c.solved) for c in found),
            )
        )
    return rows


# Packed in binary, not JSON: a board reads 1,000 rows of ten categories' sums, and parsing
# their floats from JSON took most of a build (0.6 s of 0.8 s on the loaded 2-core box).
# A category's sums: its index in the catalog's order (OVERALL_INDEX: over all), the fields
# of scoring.Totals in order, then when reached (microseconds since the epoch; NO_TIME: never).
TOTALS = struct.Struct("<Bqq4dqdq3dq")
OVERALL_INDEX = 255
NO_TIME = -(2**63)
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# A counted result: problem id, which of the numbers are None (a bit each), then the numbers
# of scoring.Solved in order (speedup, weight, roofline, low, high).
SOLVED = struct.Struct("<qB5d")
Packed = bytes | memoryview  # SQLite returns bytes, PostgreSQL a memoryview


def _sums(found: list[Counted]) -> bytes:
    """The sums per category, then over all (in the columns' order: as build_leaderboard)."""
    by_category: dict[str, list[Counted]] = defaultdict(list)
    for entry in found:
        by_category[entry.category].append(entry)
    packed = []
    overall = Totals()
    for category in sorted(by_category, key=CATEGORY_ORDER.index):
        entries = by_category[category]
        totals = Totals.of([c.solved for c in entries])
        reached = _latest(c.reached_at for c in entries)
        packed.append(pack(CATEGORY_ORDER.index(category), totals, reached))
        overall = overall + totals
    packed.append(pack(OVERALL_INDEX, overall, _latest(c.reached_at for c in found)))
    return b"".join(packed)


def category_index(category: str) -> int:
    return CATEGORY_ORDER.index(category)


def _latest(moments: Iterable[datetime | None]) -> datetime | None:
    return max((m for m in moments if m is not None), default=None)


def pack(index: int, totals: Totals, reached_at: datetime | None) -> bytes:
    when = NO_TIME if reached_at is None else (reached_at - EPOCH) // timedelta(microseconds=1)
    solved, faster, weights, *rest = astuple(totals)
    return TOTALS.pack(index, solved, faster, *weights, *rest, when)


def unpacked(totals: Packed) -> dict[int, tuple]:
    """A kept row's sums by category index (OVERALL_INDEX: over all), as `totals_of` reads."""
    return {fields[0]: fields for fields in TOTALS.iter_unpack(totals)}


def sums_at(totals: Packed, index: int) -> tuple | None:
    """The sums of one category (OVERALL_INDEX: over all) of a kept row; None if it has
    none. Unpacked one at a time: a board keeps only what it reads (fewer objects for
    Python's cyclic collector to walk, whose full passes took 0.3 s, 2026-11-28)."""
    for fields in TOTALS.iter_unpack(totals):
        if fields[0] == index:
            return fields
    return None


def totals_of(fields: tuple) -> tuple[Totals, datetime | None]:
    _, solved, faster, w0, w1, w2, *rest, when = fields
    reached = None if when == NO_TIME else EPOCH + timedelta(microseconds=when)
    return Totals(solved, faster, (w0, w1, w2), *rest), reached


def _pack_solved(problem_id: int, solved: Solved) -> bytes:
    missing = sum(1 << i for i, value in enumerate(solved) if value is None)
    return SOLVED.pack(problem_id, missing, *(0.0 if v is None else v for v in solved))


def solved_of(counted: Packed, problem_ids: set[int] | None) -> tuple[Solved, ...]:
    """A kept row's counted results within `problem_ids` (None: all), by problem id."""
    return tuple(
        Solved._make(None if missing >> i & 1 else v for i, v in enumerate(numbers))
        for pid, missing, *numbers in SOLVED.iter_unpack(counted)
        if problem_ids is None or pid in problem_ids
    )


def speedups_of(counted: Packed) -> Iterator[tuple[int, float | None]]:
    """(problem id, speedup) of each of a kept row's counted results."""
    for pid, missing, speedup, *_ in SOLVED.iter_unpack(counted):
        yield pid, None if missing & 1 else speedup
