"""Reads of the entries app: attempts with their outcomes, pass@k scores, quotas, and the
entries' rows on the boards.

An attempt counts in its problem's n once judged: its submission is done and its result
is at the problem's current version (a sample judged against an older version waits for
the admins' "Start over", as a team's result does). A pass counts unflagged only, and not
when the sample is disqualified; its numbers are the medians over its judged runs, as a
team's counted result's are (selectors/counted.py). Queued, running, failed (the host,
not the sample) and cancelled attempts keep their declared slot and are not judged yet.
"""

from portal.entries.selectors.attempts import NOT_JUDGED, AttemptRow, entry_attempts
from portal.entries.selectors.boards import (
    ProblemEntryRow,
    entry_board_rows,
    problem_entry_rows,
)
from portal.entries.selectors.scores import (
    EntryScores,
    ProblemScore,
    entry_scores,
    problem_scores,
    scope_of,
)
from portal.entries.selectors.status import (
    EntryQuota,
    EntryStatus,
    SampleLine,
    entries_with_scores,
    entry_attempt_counts,
    entry_quota,
    entry_status,
)

__all__ = [
    "NOT_JUDGED",
    "AttemptRow",
    "EntryQuota",
    "EntryScores",
    "EntryStatus",
    "ProblemEntryRow",
    "ProblemScore",
    "SampleLine",
    "entries_with_scores",
    "entry_attempt_counts",
    "entry_attempts",
    "entry_board_rows",
    "entry_quota",
    "entry_scores",
    "entry_status",
    "problem_entry_rows",
    "problem_scores",
    "scope_of",
]
