"""The leaderboard's periodic work: re-runs of the top entries for the ranking."""

from __future__ import annotations

from celery import shared_task

from portal.leaderboard.reruns import reruns_for_ranking
from portal.submissions.services import reruns_sweep

RERUN_TASK = "portal.rerun_top"


@shared_task(name=RERUN_TASK)
def rerun_top() -> dict[str, list[int]]:
    # Stalled re-runs are failed whatever the setting: admins may queue re-runs by hand.
    failed = reruns_sweep()
    return {"queued": [r.pk for r in reruns_for_ranking()], "failed": failed}
