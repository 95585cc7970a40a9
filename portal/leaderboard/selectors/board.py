"""The leaderboard of a hardware profile, overall or per category."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property

from django.db import connection
from django.db.models import Case, F, QuerySet, When, Window
from django.db.models.functions import RowNumber
from django.utils.safestring import SafeString

from portal.accounts.models import Team
from portal.leaderboard import charts, freshness
from portal.leaderboard.scoring import HEADLINE_P, Score, Solved, Totals, fast_p_steps
from portal.problems.models import Category, Problem
from portal.submissions.models import ProblemResult

BASELINE_NAME = "PyTorch + NCCL (reference)"


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
    categories: list[Score]  # in the order of the board's columns
    reached_at: datetime | None  # when the team reached its score (its last improvement)
    # The team's best results as "speedup:weight" pairs (0 for a pass without a timing), as
    # the database returns them: parsed into the curve only for rows that are shown (a page
    # shows 50 of 1,000 teams; parsing all of them would cost a rebuild tens of ms).
    best_pairs: str = ""
    is_baseline: bool = False
    # An example bundle's row (Submission.example_label): `team_name` is its label.
    is_example: bool = False
    rank: int | None = None  # None for the baseline and examples

    @property
    def is_ranked(self) -> bool:
        return not (self.is_baseline or self.is_example)

    @property
    def label(self) -> str | None:
        """The public label of an example's row; None for other rows."""
        return self.team_name if self.is_example else None

    @property
    def roofline(self) -> float | None:
        """Mean fraction of the link limit over the counted results that report one."""
        return self.score.roofline

    @cached_property
    def curve(self) -> list[tuple[float, float]]:
        """The fast_p curve's corners for p from 0 to 4."""
        solved = [
            Solved(float(speedup), float(weight))
            for speedup, weight in (pair.split(":") for pair in self.best_pairs.split())
        ]
        return fast_p_steps(solved, self.score.total_weight)

    @cached_property
    def curve_svg(self) -> SafeString:
        # Drawn once per row and kept with the memoised board.
        return charts.fast_p_sparkline(self.curve, label=self.team_name)


@dataclass
class Board:
    profile: str
    category: str | None
    columns: list[CategoryColumn]
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


def _best_per_problem(*, profile: str, problem_ids: list[int] | None) -> QuerySet:
    """The best passed, unflagged result of each (team, problem) and of each (example
    label, problem); earliest among equals.

    An example's results are grouped by its label, whoever submitted it: `best_team` is
    NULL for them, `best_label` empty for teams'. `problem_ids`: the problems in scope;
    None for every published one.
    """
    label = F("submission__example_label")
    team = Case(When(submission__example_label="", then=F("submission__team_id")))
    counted = ProblemResult.objects.judged(profile=profile).passed().unflagged()
    if problem_ids is not None:
        counted = counted.filter(problem_id__in=problem_ids)
    counted = counted.annotate(best_team=team, best_label=label)
    order = [
        F("speedup").desc(nulls_last=True),
        F("submission__finished_at").asc(),
        F("id").asc(),
    ]
    if connection.vendor == "postgresql":
        # DISTINCT ON keeps the first row of each group in one sort, without numbering every
        # row first as the window function does. NULLs (every example) are one group.
        best = counted.order_by("best_team", "best_label", "problem_id", *order).distinct(
            "best_team", "best_label", "problem_id"
        )
    else:
        window = Window(RowNumber(), partition_by=[team, label, F("problem_id")], order_by=order)
        best = counted.annotate(place=window).filter(place=1)
    return best.values(
        "speedup",
        "roofline",
        "best_team",
        "best_label",
        best_category=F("problem__category"),
        best_weight=F("problem__weight"),
        best_at=F("submission__finished_at"),
    )


def _pairs_sql() -> str:
    """SQL of the "speedup:weight" pairs of a group, written so that float() reads back the
    very same doubles: PostgreSQL prints the shortest exact form, SQLite's CAST only 15
    digits, hence its printf with 17."""
    if connection.vendor == "postgresql":
        return "STRING_AGG(COALESCE(speedup, 0)::text || ':' || best_weight::text, ' ')"
    return "GROUP_CONCAT(PRINTF('%%!.17g:%%!.17g', COALESCE(speedup, 0), best_weight), ' ')"


def _totals_sql(best_sql: str) -> str:
    """Per team and category, the sums a score is made of (`scoring.Totals`), the time of
    the last best result, and the pairs the curve is drawn from."""
    above = [
        "SUM(best_weight)"
        if p <= 0
        else f"SUM(CASE WHEN speedup > {p} THEN best_weight ELSE 0 END)"
        for p in HEADLINE_P
    ]
    return f"""
        SELECT best_team, best_label, best_category, COUNT(*),
            SUM(CASE WHEN speedup > 1 THEN 1 ELSE 0 END), {", ".join(above)},
            SUM(CASE WHEN speedup > 0 THEN LN(speedup) ELSE 0 END),
            SUM(CASE WHEN speedup > 0 THEN 1 ELSE 0 END),
            COALESCE(SUM(roofline), 0), COUNT(roofline), MAX(best_at), {_pairs_sql()}
        FROM ({best_sql}) AS best
        GROUP BY best_team, best_label, best_category"""


@dataclass
class _TeamTotals:
    by_category: dict[str, Totals] = field(default_factory=dict)
    reached_at: datetime | None = None
    pairs: list[str] = field(default_factory=list)


def _team_totals(*, profile: str, problem_ids: list[int] | None) -> dict[int | str, _TeamTotals]:
    """Every team's totals per category, by team id, and every example's, by its label;
    one query.

    The database sums, so that about 12 rows per team cross to Python rather than one per
    solved problem (33,000 at 1,000 teams and 90 problems, most of a rebuild's time).
    """
    best_sql, params = _best_per_problem(
        profile=profile, problem_ids=problem_ids
    ).query.sql_with_params()
    # SQLite returns MAX() of a datetime as text: the field's own conversion reads it.
    convert = getattr(connection.ops, "convert_datetimefield_value", None)
    teams: dict[int | str, _TeamTotals] = defaultdict(_TeamTotals)
    with connection.cursor() as cursor:
        cursor.execute(_totals_sql(best_sql), params)
        for team_id, label, category, solved, faster, *rest in cursor.fetchall():
            *weights, log_sum, timed, roofline_sum, rooflines, reached_at, pairs = rest
            if convert is not None:
                reached_at = convert(reached_at, None, connection)
            team = teams[label if team_id is None else team_id]
            team.by_category[category] = Totals(
                solved,
                int(faster),
                tuple(map(float, weights)),
                float(log_sum),
                int(timed),
                float(roofline_sum),
                rooflines,
            )
            if reached_at is not None and (team.reached_at is None or reached_at > team.reached_at):
                team.reached_at = reached_at
            team.pairs.append(pairs)
    return teams


def _runs_on(profiles: list[str] | None, profile: str) -> bool:
    """A problem is in a profile's scope unless an admin limited it to other profiles."""
    return not profiles or profile in profiles


def _columns(problems: list[tuple[int, str, float]]) -> list[CategoryColumn]:
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


def _team_row(
    team: tuple[str, str], totals: _TeamTotals, board: Board, *, is_example: bool = False
) -> Row:
    total = sum(col.total for col in board.columns)
    total_weight = sum(col.total_weight for col in board.columns)
    overall = sum(totals.by_category.values(), Totals())
    return Row(
        team_name=team[0],
        team_slug=team[1],
        score=Score.of_totals(overall, total=total, total_weight=total_weight),
        categories=[
            Score.of_totals(
                totals.by_category.get(c.value, Totals()),
                total=c.total,
                total_weight=c.total_weight,
            )
            for c in board.columns
        ],
        reached_at=totals.reached_at,
        best_pairs=" ".join(totals.pairs),
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
        best_pairs=" ".join(f"1.0:{w!r}" for w in weights),
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
    rank = 0
    for row in rows:
        if row.is_ranked:
            rank += 1
            row.rank = rank
    return rows


def build_leaderboard(*, profile: str, category: str | None = None) -> Board:
    """The board computed from the database: three queries whatever the number of teams
    and examples."""
    all_published = list(
        Problem.objects.published().values_list("id", "category", "weight", "profiles")
    )
    published = [(pid, cat, w) for pid, cat, w, where in all_published if _runs_on(where, profile)]
    present = {cat for _, cat, _ in published}
    in_scope = [p for p in published if category is None or p[1] == category]
    board = Board(
        profile=profile,
        category=category,
        columns=_columns(in_scope),
        categories_present=[c.value for c in Category if c.value in present],
        weighted=any(w != 1.0 for _, _, w in in_scope),
    )
    if not in_scope:
        return board
    # Without a category or a problem limited to other hardware, every published problem is
    # in scope, and `counted` already keeps to those: no list of ids for the planner.
    everything = category is None and len(in_scope) == len(all_published)
    ids = None if everything else [pid for pid, _, _ in in_scope]
    per_team = _team_totals(profile=profile, problem_ids=ids)
    rows = [_baseline_row(in_scope, board)]
    names = {
        tid: (name, slug)
        # Every team rather than `id IN (...)`: a thousand ids would near SQLite's old limit
        # of bound parameters, and the table is small next to the results.
        for tid, name, slug in Team.objects.values_list("id", "name", "slug")
    }
    for key, totals in per_team.items():
        if isinstance(key, str):
            rows.append(_team_row((key, ""), totals, board, is_example=True))
        elif key in names:  # else a team deleted since the results were read
            rows.append(_team_row(names[key], totals, board))
    board.rows = _rank(rows)
    return board


def leaderboard(
    *,
    profile: str,
    category: str | None = None,
    prepare: Callable[[Board], None] | None = None,
) -> Board:
    """The board, memoised until a result, submission, problem or team changes.

    One query (the data's version) when the memo is fresh, four when it is built.
    `prepare` runs on a new board where it is built (a background thread, after a change),
    e.g. to render what a page will show, so that the page need not.
    """

    def build() -> Board:
        board = build_leaderboard(profile=profile, category=category)
        if prepare is not None:
            prepare(board)
        return board

    return freshness.memoised(("board", profile, category), build)


def leaderboard_rows(*, profile: str, category: str | None = None) -> list[Row]:
    return leaderboard(profile=profile, category=category).rows
