"""Results under review: the precheck's findings keep a result off the boards until an
admin has read them and cleared it (docs/security.md, "The precheck").

A host reports each problem's findings (the contract's `review`); recording a result with
any flags it `under_review` (a flag of the portal's own, like `not_frozen`), so every
board, ranking and standing leaves it out as it leaves out any flagged result. Clearing
takes the flag off the result and its runs and says who cleared it when; the admin log
keeps the action too.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.utils import timezone

from evaluator.face import Bundle, precheck_files
from portal.submissions.models import ProblemResult, Submission

UNDER_REVIEW = ProblemResult.Flag.UNDER_REVIEW.value


def review_flags(review: list[dict[str, Any]]) -> list[str]:
    """The flags a reported result's findings add: under review, if it has any."""
    return [UNDER_REVIEW] if review else []


def bundle_precheck(bundle: Bundle) -> dict[str, list[dict[str, Any]]]:
    """{slug: findings} of an uploaded bundle, as its host will report them; problems
    without a finding are left out."""
    found = precheck_files(bundle.files, bundle.solutions)
    return {slug: [f.to_json() for f in findings] for slug, findings in found.items() if findings}


def result_review_clear(*, result: ProblemResult, by: AbstractBaseUser) -> bool:
    """Take `result` off review, so that it may rank; False if it was not under review."""
    with transaction.atomic():
        locked = ProblemResult.objects.select_for_update().get(pk=result.pk)
        if UNDER_REVIEW not in locked.flags:
            return False
        locked.flags = [f for f in locked.flags if f != UNDER_REVIEW]
        locked.review_cleared_at = timezone.now()
        locked.review_cleared_by = by  # type: ignore[assignment]
        locked.save(update_fields=["flags", "review_cleared_at", "review_cleared_by"])
        # The boards pool a result's runs by their own flags (leaderboard/selectors).
        for run in locked.runs.all():
            if UNDER_REVIEW in run.flags:
                run.flags = [f for f in run.flags if f != UNDER_REVIEW]
                run.save(update_fields=["flags"])
    result.refresh_from_db()
    return True


def submission_review_clear(*, submission: Submission, by: AbstractBaseUser) -> int:
    """Clear every result of `submission` under review; how many were."""
    results = submission.results.filter(flags__contains=[UNDER_REVIEW])
    return sum(result_review_clear(result=r, by=by) for r in results)
