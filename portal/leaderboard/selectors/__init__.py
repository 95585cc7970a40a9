"""The leaderboard, per-problem rankings and teams' standings; scores in Python.

Per problem, a team's newest passed, unflagged result counts, its numbers pooled over every
run of the same code (selectors/counted.py; a flagged pass, e.g. a time under the physical
floor, is evidence on its submission's page, never a score). Results are
always selected through `ProblemResult.objects.counted(profile=...)`, so one hardware
profile's results never meet another's, and whatever `counted` excludes (unfinished or
disqualified submissions, unpublished problems) is excluded everywhere. Examples
(`Submission.example_label`) are left out of `counted`; the boards read them with the
teams' (`judged`) and show them as labelled rows beside the baseline, never ranked.

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
from portal.leaderboard.selectors.counted import Counted, counted_query, counted_results
from portal.leaderboard.selectors.ranking import (
    ExampleRow,
    ProblemBoard,
    ProblemEntry,
    ProblemRow,
    problem_board,
    problem_entries,
    problem_ranking,
)
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
    "Counted",
    "ExampleRow",
    "HistoryEntry",
    "ProblemBoard",
    "ProblemEntry",
    "ProblemRow",
    "Row",
    "TeamBest",
    "TeamStanding",
    "build_leaderboard",
    "counted_query",
    "counted_results",
    "leaderboard",
    "leaderboard_rows",
    "problem_board",
    "problem_entries",
    "problem_ranking",
    "team_history",
    "team_standing",
]
