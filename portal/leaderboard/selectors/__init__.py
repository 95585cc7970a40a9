"""The leaderboard, per-problem rankings and teams' standings; scores in Python.

A team's best passed, unflagged result per problem counts (a flagged pass, e.g. a time under
the physical floor, is evidence on its submission's page, never a score). Results are
always selected through `ProblemResult.objects.counted(profile=...)`, so one hardware
profile's results never meet another's, and whatever `counted` excludes (unfinished or
disqualified submissions, unpublished problems) is excluded everywhere.

Scoring and the ranking order are in `portal.leaderboard.scoring`. Boards are memoised by
`portal.leaderboard.freshness` until the data they read changes.
"""

from portal.leaderboard.selectors.board import (
    BASELINE_NAME,
    Board,
    CategoryColumn,
    Row,
    build_leaderboard,
    leaderboard,
    leaderboard_rows,
)
from portal.leaderboard.selectors.ranking import ProblemRow, problem_ranking
from portal.leaderboard.selectors.teams import (
    HistoryEntry,
    TeamBest,
    TeamStanding,
    team_history,
    team_standing,
)

__all__ = [
    "BASELINE_NAME",
    "Board",
    "CategoryColumn",
    "HistoryEntry",
    "ProblemRow",
    "Row",
    "TeamBest",
    "TeamStanding",
    "build_leaderboard",
    "leaderboard",
    "leaderboard_rows",
    "problem_ranking",
    "team_history",
    "team_standing",
]
