"""pass@k and fast_1@k of an entry over a scope of problems (portal/leaderboard/scoring.py
says the estimator)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from portal.entries.models import Entry
from portal.entries.selectors.attempts import AttemptRow
from portal.leaderboard.scoring import pass_at_k
from portal.problems.models import Problem


@dataclass(frozen=True)
class ProblemScore:
    """An entry's samples on one problem: n judged, c passed, f of them faster than 1."""

    slug: str
    category: str
    weight: float
    sent: int  # attempts sent, judged or not
    n: int
    c: int
    f: int

    def at(self, k: int, count: int) -> float | None:
        """pass@k of `count` successes among the n judged; None until k of them are."""
        return pass_at_k(self.n, count, k) if self.n >= k else None


@dataclass(frozen=True)
class EntryScores:
    """pass@1, pass@k, fast_1@1 and fast_1@k over a scope of problems: each a weighted share
    of the scope, a problem without samples counting 0; None while some problem with
    samples has fewer than k judged (n < k) ones, whose estimate is not defined yet."""

    k: int
    pass_at_1: float | None
    pass_at_k: float | None
    fast_1_at_1: float | None
    fast_1_at_k: float | None
    problems: list[ProblemScore]
    total: int
    sent: int
    judged: int
    declared: int = 1  # samples the entry declared per problem (its n)

    @property
    def complete(self) -> bool:
        """Every attempt sent is judged and each problem tried has the declared n: 2 of
        n=3 sent and judged is not complete (issue 40)."""
        enough = all(p.n >= self.declared for p in self.problems if p.sent)
        return self.sent == self.judged and self.sent > 0 and enough


def _share(problems: list[ProblemScore], weights: float, k: int, fast: bool) -> float | None:
    value = 0.0
    for p in problems:
        if p.sent == 0:
            continue
        estimate = p.at(k, p.f if fast else p.c)
        if estimate is None:
            return None
        value += p.weight * estimate
    return value / weights if weights > 0 else 0.0


def problem_scores(attempts: Iterable[AttemptRow]) -> dict[int, ProblemScore]:
    by_problem: dict[int, list[AttemptRow]] = defaultdict(list)
    for a in attempts:
        by_problem[a.problem_id].append(a)
    scores = {}
    for pid, rows in by_problem.items():
        judged = [a for a in rows if a.judged]
        scores[pid] = ProblemScore(
            slug=rows[0].slug,
            category=rows[0].category,
            weight=rows[0].weight,
            sent=len(rows),
            n=len(judged),
            c=sum(1 for a in judged if a.passed),
            f=sum(1 for a in judged if a.faster_than(1.0)),
        )
    return scores


def scope_of(profile: str, category: str | None = None) -> list[tuple[int, str, float]]:
    """The published problems a board of the profile (and category) ranks on: (id,
    category, weight), as build_leaderboard reads them."""
    rows = Problem.objects.published().in_category(category)
    return [
        (pid, cat, weight)
        for pid, cat, weight, profiles in rows.values_list("id", "category", "weight", "profiles")
        if not profiles or profile in profiles
    ]


def entry_scores(
    entry: Entry, attempts: list[AttemptRow], scope: list[tuple[int, str, float]]
) -> EntryScores:
    """The entry's scores over the scope, from its attempts on the scope's profile."""
    in_scope = {pid for pid, _, _ in scope}
    by_problem = problem_scores(a for a in attempts if a.problem_id in in_scope)
    problems = sorted(by_problem.values(), key=lambda p: (p.category, p.slug))
    weights = sum(w for _, _, w in scope)
    return EntryScores(
        k=entry.k,
        pass_at_1=_share(problems, weights, 1, fast=False),
        pass_at_k=_share(problems, weights, entry.k, fast=False),
        fast_1_at_1=_share(problems, weights, 1, fast=True),
        fast_1_at_k=_share(problems, weights, entry.k, fast=True),
        problems=problems,
        total=len(scope),
        sent=sum(p.sent for p in problems),
        judged=sum(p.n for p in problems),
        declared=entry.samples_per_problem,
    )
