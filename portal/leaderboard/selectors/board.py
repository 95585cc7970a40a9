"""The leaderboard of a hardware profile, overall or per category."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from operator import attrgetter
from typing import Generic, TypeVar

from django.utils.safestring import SafeString

from portal.leaderboard import charts, freshness, kept
from portal.leaderboard.models import KeptRow
from portal.leaderboard.scoring import Score, Solved, Totals, fast_p_steps, rank_ranges
from portal.leaderboard.selectors.counted import counted_query, counted_results
from portal.problems.models import Category, Problem

BASELINE_NAME = "PyTorch + NCCL (reference)"

T = TypeVar("T")


class Deferred(Sequence[T], Generic[T]):
    """A list made when first read. A board of 1,000 teams shows 50 rows a page, and making
    every row's twelve category scores and its curve's results took longer than the rest
    of a build from kept rows."""

    def __init__(self, make: Callable[[], Sequence[T]]) -> None:
        self._make: Callable[[], Sequence[T]] | None = make
        self._items: Sequence[T] = ()

    def _list(self) -> Sequence[T]:
        make = self._make
        if make is not None:  # two threads may both make it: the same list, harmless
            self._items, self._make = make(), None
        return self._items

    def __getitem__(self, index):  # type: ignore[override]
        return self._list()[index]

    def __len__(self) -> int:
        return len(self._list())


@dataclass(frozen=True)
class CategoryColumn:
    value: str
    label: str
    total: int
    total_weight: float = 0.0


@dataclass(eq=False)
class Row:
    team_name: str
    team_slug: str
    score: Score
    categories: Sequence[Score]  # in the order of the board's columns
    # When the team reached its score: the latest time one of its counted codes first
    # reached the board (selectors/counted.py).
    reached_at: datetime | None
    # The team's counted results, one per problem solved: the curve is drawn from them.
    counted: Sequence[Solved] = ()
    is_baseline: bool = False
    # An example bundle's row (Submission.example_label): `team_name` is its label.
    is_example: bool = False
    rank: int | None = None  # None for the baseline and examples
    # The places the team's score could take within its and the others' intervals
    # (scoring.rank_ranges): rank_low <= rank <= rank_high.
    rank_low: int | None = None
    rank_high: int | None = None
    # A model or agent entry's row (portal/entries): `team_name` is the entry's name,
    # `team_slug` its team's; its score is the expected one of a single sample per problem.
    entry_slug: str = ""
    entry_kind: str = ""

    @property
    def is_entry(self) -> bool:
        return bool(self.entry_slug)

    @property
    def is_ranked(self) -> bool:
        return not (self.is_baseline or self.is_example)

    @property
    def label(self) -> str | None:
        """The public label of an example's row; None for other rows."""
        return self.team_name if self.is_example else None

    @property
    def rank_range(self) -> str | None:
        """ "2-4" where the score is not separable from others' (the places it could take),
        None where its rank is settled."""
        if self.rank_low is None or self.rank_high is None or self.rank_low == self.rank_high:
            return None
        return f"{self.rank_low}-{self.rank_high}"

    @property
    def roofline(self) -> float | None:
        """Mean fraction of the link limit over the counted results that report one."""
        return self.score.roofline

    @cached_property
    def curve(self) -> list[tuple[float, float]]:
        """The fast_p curve's corners for p from 0 to 4 (counted on the lower ends)."""
        return fast_p_steps(list(self.counted), self.score.total_weight)

    @cached_property
    def curve_svg(self) -> SafeString:
        # Drawn once per row and kept with the memoised board.
        return charts.fast_p_sparkline(self.curve, label=self.team_name)


@dataclass
class Board:
    profile: str
    category: str | None
    columns: list[CategoryColumn]
    who: str = "all"  # whose rows: "people", "models" or "all" (portal/entries)
    rows: list[Row] = field(default_factory=list)
    categories_present: list[str] = field(default_factory=list)  # for the switcher
    weighted: bool = False  # some problem in scope weighs other than 1
    # Rendered rows, kept with the memoised board: a page of 50 rows with 12 category groups
    # costs tens of milliseconds to render through templates, a lookup once rendered.
    fragments: dict[int, SafeString] = field(default_factory=dict, repr=False)

    @property
    def show_groups(self) -> bool:
        """One column group per category, unless it would repeat the headline columns."""
        return self.category is None and len(self.columns) > 1

    @property
    def teams(self) -> int:
        return sum(1 for r in self.rows if r.is_ranked)


@dataclass
class _TeamTotals:
    name: str = ""
    slug: str = ""
    by_category: dict[str, list[Solved]] = field(default_factory=lambda: defaultdict(list))
    counted: list[Solved] = field(default_factory=list)  # by problem id
    reached_at: datetime | None = None


def _team_totals(*, profile: str, problem_ids: list[int] | None) -> dict[int | str, _TeamTotals]:
    """Every team's counted results per category, by team id, and every example's, by its
    label (selectors/counted.py); one query, two when some counted result was re-run."""
    teams: dict[int | str, _TeamTotals] = defaultdict(_TeamTotals)
    counted = counted_results(counted_query(profile=profile, problem_ids=problem_ids))
    # By problem id: sums in a fixed order, the order of the kept rows' (kept.py).
    for entry in sorted(counted, key=attrgetter("problem_id")):
        team = teams[entry.group]
        team.name, team.slug = entry.team_name, entry.team_slug
        team.by_category[entry.category].append(entry.solved)
        team.counted.append(entry.solved)
        reached = entry.reached_at
        if reached is not None and (team.reached_at is None or reached > team.reached_at):
            team.reached_at = reached
    return teams


def runs_on(profiles: list[str] | None, profile: str) -> bool:
    """A problem is in a profile's scope unless an admin limited it to other profiles."""
    return not profiles or profile in profiles


def category_columns(problems: list[tuple[int, str, float]]) -> list[CategoryColumn]:
    counts: dict[str, int] = defaultdict(int)
    weights: dict[str, float] = defaultdict(float)
    for _, category, weight in problems:
        counts[category] += 1
        weights[category] += weight
    return [
        CategoryColumn(c.value, c.label, counts[c.value], weights[c.value])
        for c in Category
        if counts[c.value]
    ]


def _team_row(totals: _TeamTotals, board: Board, *, is_example: bool = False) -> Row:
    total = sum(col.total for col in board.columns)
    total_weight = sum(col.total_weight for col in board.columns)
    by_category = {c: Totals.of(solved) for c, solved in totals.by_category.items()}
    # Summed in the columns' order, as kept.py sums them.
    overall = sum((by_category[c.value] for c in board.columns if c.value in by_category), Totals())
    return Row(
        team_name=totals.name,
        team_slug=totals.slug,
        score=Score.of_totals(overall, total=total, total_weight=total_weight),
        categories=[
            Score.of_totals(
                by_category.get(c.value, Totals()), total=c.total, total_weight=c.total_weight
            )
            for c in board.columns
        ],
        reached_at=totals.reached_at,
        counted=tuple(totals.counted),
        is_example=is_example,
    )


def _baseline_row(problems: list[tuple[int, str, float]], board: Board) -> Row:
    weights = [w for _, _, w in problems]
    by_category: dict[str, list[float]] = defaultdict(list)
    for _, category, weight in problems:
        by_category[category].append(weight)
    return Row(
        team_name=BASELINE_NAME,
        team_slug="",
        score=Score.reference(weights),
        categories=[Score.reference(by_category[c.value]) for c in board.columns],
        reached_at=None,
        counted=tuple(Solved(1.0, w) for w in weights),
        is_baseline=True,
    )


def _rank(rows: list[Row]) -> list[Row]:
    # Best score first; among equal scores the earlier wins, and the baseline was there
    # first. An example yields to every team that matches it: it never stands in front of
    # a team with its score, and takes no rank.
    rows.sort(
        key=lambda r: (
            tuple(-v for v in r.score.sort_key()),
            0 if r.is_baseline else 2 if r.is_example else 1,
            r.reached_at.timestamp() if r.reached_at else 0.0,
            r.team_name,
        )
    )
    ranked = [row for row in rows if row.is_ranked]
    ranges = rank_ranges([row.score for row in ranked])
    for rank, (row, (low, high)) in enumerate(zip(ranked, ranges, strict=True), start=1):
        row.rank, row.rank_low, row.rank_high = rank, low, high
    return rows


def _frame(*, profile: str, category: str | None, who: str) -> tuple[Board, list, bool]:
    """The board without rows, the problems in its scope, and whether they are every
    published problem; one query."""
    all_published = list(
        Problem.objects.published().values_list("id", "category", "weight", "profiles")
    )
    published = [(pid, cat, w) for pid, cat, w, where in all_published if runs_on(where, profile)]
    present = {cat for _, cat, _ in published}
    in_scope = [p for p in published if category is None or p[1] == category]
    board = Board(
        profile=profile,
        category=category,
        who=who,
        columns=category_columns(in_scope),
        categories_present=[c.value for c in Category if c.value in present],
        weighted=any(w != 1.0 for _, _, w in in_scope),
    )
    return board, in_scope, category is None and len(in_scope) == len(all_published)


def _ranked(board: Board, rows: list[Row], in_scope: list) -> Board:
    """The board with `rows`, the baseline's and the entries' ranked."""
    rows.insert(0, _baseline_row(in_scope, board))
    if board.who != "people":
        from portal.entries.selectors import entry_board_rows  # it builds on this module

        scope = [pid for pid, _, _ in in_scope]
        rows += entry_board_rows(profile=board.profile, problem_ids=scope, board=board)
    board.rows = _rank(rows)
    return board


def build_leaderboard(*, profile: str, category: str | None = None, who: str = "all") -> Board:
    """The board computed from the results: two queries whatever the number of teams
    and examples, three when some counted result was re-run, and the entries' (one, two
    with some, three when some sample was re-run). `who`: "people" (the teams' rows),
    "models" (the model and agent entries'), or "all"; the baseline and examples always.

    The straightforward computation, which `build_kept_leaderboard` must equal."""
    board, in_scope, everything = _frame(profile=profile, category=category, who=who)
    if not in_scope:
        return board
    # Without a category or a problem limited to other hardware, every published problem is
    # in scope, and `counted` already keeps to those: no list of ids for the planner.
    ids = None if everything else [pid for pid, _, _ in in_scope]
    per_team = _team_totals(profile=profile, problem_ids=ids)
    rows = [
        _team_row(totals, board, is_example=isinstance(key, str))
        for key, totals in per_team.items()
        if who != "models" or isinstance(key, str)
    ]
    return _ranked(board, rows, in_scope)


def build_kept_leaderboard(*, profile: str, category: str | None = None, who: str = "all") -> Board:
    """The board built from the kept rows (portal/leaderboard/kept.py), after computing
    again those a change marked: what `build_leaderboard` computes, one row read per team.
    Three queries when nothing is marked, and the entries'."""
    kept.refresh()
    board, in_scope, _ = _frame(profile=profile, category=category, who=who)
    if not in_scope:
        return board
    scope = None if category is None else {pid for pid, _, _ in in_scope}
    found = KeptRow.objects.filter(profile=profile)
    if who == "models":
        found = found.filter(team_id__isnull=True)  # examples only
    rows = [
        row
        for values in found.values_list("team_id", "name", "slug", "totals", "counted")
        if (row := _kept_row(values, board, scope)) is not None
    ]
    return _ranked(board, rows, in_scope)


def _kept_row(values: tuple, board: Board, scope: set[int] | None) -> Row | None:
    team_id, name, slug, packed, counted = values
    index = kept.OVERALL_INDEX if board.category is None else kept.category_index(board.category)
    fields = kept.sums_at(packed, index)
    if fields is None:
        return None  # nothing counted in this category
    totals, reached_at = kept.totals_of(fields)
    if board.category is not None:
        totals = Totals() + totals  # as build_leaderboard sums a category board's one column

    # The columns, not the board: a row whose board holds it would be a cycle, left to the
    # cyclic collector, whose full passes took 0.5 s here (2026-11-28).
    columns = board.columns

    def categories() -> list[Score]:
        sums = kept.unpacked(packed)
        return [
            Score.of_totals(
                kept.totals_of(sums[i])[0]
                if (i := kept.category_index(c.value)) in sums
                else Totals(),
                total=c.total,
                total_weight=c.total_weight,
            )
            for c in columns
        ]

    return Row(
        team_name=name,
        team_slug=slug,
        score=Score.of_totals(
            totals,
            total=sum(c.total for c in board.columns),
            total_weight=sum(c.total_weight for c in board.columns),
        ),
        categories=Deferred(categories),
        reached_at=reached_at,
        counted=Deferred(lambda: kept.solved_of(counted, scope)),
        is_example=team_id is None,
    )


def leaderboard(
    *,
    profile: str,
    category: str | None = None,
    prepare: Callable[[Board], None] | None = None,
    who: str = "all",
) -> Board:
    """The board, memoised until a result, submission, problem or team changes.

    One query (the data's version) when the memo is fresh, three or four when it is built.
    `prepare` runs on a new board where it is built (a background thread, after a change),
    e.g. to render what a page will show, so that the page need not.
    """

    def build() -> Board:
        board = build_kept_leaderboard(profile=profile, category=category, who=who)
        if prepare is not None:
            prepare(board)
        return board

    return freshness.memoised(board_key(profile, category, who), build)


def board_key(profile: str, category: str | None = None, who: str = "all") -> tuple:
    """A board's key among the memoised values (freshness.wait_until_fresh takes it)."""
    return ("board", profile, category, who)


def leaderboard_rows(*, profile: str, category: str | None = None) -> list[Row]:
    return leaderboard(profile=profile, category=category).rows
