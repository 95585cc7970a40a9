"""Entries on the boards: a row each on the leaderboard, a line each on a problem's page."""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections import Counter, defaultdict
from dataclasses import dataclass

from portal.entries.models import Entry
from portal.entries.selectors.attempts import AttemptRow, entry_attempts
from portal.entries.selectors.scores import ProblemScore, problem_scores
from portal.leaderboard.scoring import Score, Solved, Totals
from portal.leaderboard.selectors.board import Board, Row


def _expected_solved(attempts: list[AttemptRow], n: dict[int, int]) -> list[Solved]:
    """Each passed sample as a Solved of weight w/n: fast_p over them is fast_p@1."""
    return [a.solved._replace(weight=a.weight / n[a.problem_id]) for a in attempts if a.passed]


def _expected_score(
    attempts: list[AttemptRow], n: dict[int, int], *, total: int, total_weight: float
) -> Score:
    score = Score.of_totals(
        Totals.of(_expected_solved(attempts, n)), total=total, total_weight=total_weight
    )
    # The counts beside the shares: the expected number of problems one sample solves.
    solved = sum(1 / n[a.problem_id] for a in attempts if a.passed)
    faster = sum(1 / n[a.problem_id] for a in attempts if a.faster_than(1.0))
    # Half up, not Python's half to even: one of two samples is "1 of 8", as its share says.
    return dataclasses.replace(
        score, solved=math.floor(solved + 0.5), faster=math.floor(faster + 0.5)
    )


def _entry_row(entry: Entry, attempts: list[AttemptRow], board: Board) -> Row:
    judged = [a for a in attempts if a.judged]
    n = Counter(a.problem_id for a in judged)
    columns = board.columns
    total = sum(c.total for c in columns)
    total_weight = sum(c.total_weight for c in columns)
    finished = [a.finished_at for a in judged if a.finished_at is not None]
    return Row(
        team_name=entry.name,
        team_slug=entry.team.slug,
        score=_expected_score(judged, n, total=total, total_weight=total_weight),
        categories=[
            _expected_score(
                [a for a in judged if a.category == c.value],
                n,
                total=c.total,
                total_weight=c.total_weight,
            )
            for c in columns
        ],
        reached_at=max(finished, default=None),
        counted=tuple(_expected_solved(judged, n)),
        entry_slug=entry.slug,
        entry_kind=entry.kind,
    )


def entry_board_rows(*, profile: str, problem_ids: list[int], board: Board) -> list[Row]:
    """The rows of the entries with a judged sample on the board's problems; two queries,
    three when some sample's result was re-run."""
    entries = {e.pk: e for e in Entry.objects.in_good_standing().select_related("team")}
    if not entries:
        return []
    scope = set(problem_ids)
    by_entry: dict[int, list[AttemptRow]] = defaultdict(list)
    for attempt in entry_attempts(list(entries), profile=profile):
        if attempt.problem_id in scope:
            by_entry[attempt.entry_id].append(attempt)
    return [
        _entry_row(entries[eid], attempts, board)
        for eid, attempts in by_entry.items()
        if any(a.judged for a in attempts)
    ]


@dataclass(frozen=True)
class ProblemEntryRow:
    """An entry's samples on one problem, for the problem's page."""

    entry: Entry
    score: ProblemScore
    median_speedup: float | None  # of its passed samples: what a passing sample reaches

    @property
    def pass_at_1(self) -> float | None:
        return self.score.at(1, self.score.c)

    @property
    def pass_at_k(self) -> float | None:
        return self.score.at(self.entry.k, self.score.c)

    @property
    def fast_1_at_1(self) -> float | None:
        return self.score.at(1, self.score.f)

    @property
    def fast_1_at_k(self) -> float | None:
        return self.score.at(self.entry.k, self.score.f)


def problem_entry_rows(*, problem_id: int, profile: str) -> list[ProblemEntryRow]:
    """The entries with a judged sample of the problem on the profile, best pass@1 first;
    one query, two with entries (three when some sample was re-run)."""
    entries = {e.pk: e for e in Entry.objects.in_good_standing().select_related("team")}
    if not entries:
        return []
    by_entry: dict[int, list[AttemptRow]] = defaultdict(list)
    for a in entry_attempts(list(entries), profile=profile):
        if a.problem_id == problem_id:
            by_entry[a.entry_id].append(a)
    rows = []
    for eid, attempts in by_entry.items():
        (score,) = problem_scores(attempts).values()
        if score.n == 0:
            continue
        speedups = sorted(a.speedup for a in attempts if a.passed and a.speedup is not None)
        median = statistics.median(speedups) if speedups else None
        rows.append(ProblemEntryRow(entries[eid], score, median))
    return sorted(rows, key=lambda r: (-(r.pass_at_1 or 0.0), r.entry.name.lower()))
