"""Per-problem numbers for the problems list: who solved what, and how fast."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from portal.leaderboard import freshness
from portal.leaderboard.selectors import counted_query, counted_results


@dataclass
class ProblemStats:
    best_speedup: float | None = None
    solvers: set[int] = field(default_factory=set)  # team ids

    @property
    def teams_solved(self) -> int:
        return len(self.solvers)


def _build(profile: str) -> dict[int, ProblemStats]:
    stats: dict[int, ProblemStats] = defaultdict(ProblemStats)
    # The boards' own counted results (a team's newest code, pooled over its runs), so the
    # list agrees with every problem's ranking; examples are no team.
    for entry in counted_results(counted_query(profile=profile)):
        if entry.team_id is None:
            continue
        found = stats[entry.problem_id]
        found.solvers.add(entry.team_id)
        if entry.speedup is not None and (
            found.best_speedup is None or entry.speedup > found.best_speedup
        ):
            found.best_speedup = entry.speedup
    return dict(stats)


def problem_stats(*, profile: str) -> dict[int, ProblemStats]:
    """Problem id -> its stats on the profile, memoised with the boards until results
    change (one query when fresh, two or three when built)."""
    return freshness.memoised(("problem-stats", profile), lambda: _build(profile))
