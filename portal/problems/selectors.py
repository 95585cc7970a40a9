"""Per-problem numbers for the problems list: who solved what, and how fast."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from portal.leaderboard import freshness, kept
from portal.leaderboard.models import KeptRow


@dataclass
class ProblemStats:
    best_speedup: float | None = None
    solvers: set[int] = field(default_factory=set)  # team ids

    @property
    def teams_solved(self) -> int:
        return len(self.solvers)


def _build(profile: str) -> dict[int, ProblemStats]:
    stats: dict[int, ProblemStats] = defaultdict(ProblemStats)
    # The boards' own counted results (a team's newest code, pooled over its runs), as the
    # boards keep them (portal/leaderboard/kept.py), so the list agrees with every
    # problem's ranking; examples are no team.
    kept.refresh()
    teams = KeptRow.objects.filter(profile=profile, team_id__isnull=False)
    for team_id, counted in teams.values_list("team_id", "counted"):
        if team_id is None:  # never: the filter above; says so to the type checker
            continue
        for problem_id, speedup in kept.speedups_of(counted):
            found = stats[problem_id]
            found.solvers.add(team_id)
            if speedup is not None and (found.best_speedup is None or speedup > found.best_speedup):
                found.best_speedup = speedup
    return dict(stats)


def problem_stats(*, profile: str) -> dict[int, ProblemStats]:
    """Problem id -> its stats on the profile, memoised with the boards until results
    change (one query when fresh, two or three when built)."""
    return freshness.memoised(("problem-stats", profile), lambda: _build(profile))
