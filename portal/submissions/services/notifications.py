"""Mail to a team when one of its submissions has been judged."""

from __future__ import annotations

import logging

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core import mail
from django.template.loader import render_to_string
from django.urls import reverse

from portal.submissions.models import Submission

logger = logging.getLogger(__name__)


def _recipients(submission: Submission) -> list[str]:
    users = get_user_model().objects.filter(membership__team_id=submission.team_id, is_active=True)
    return sorted({email for email in users.values_list("email", flat=True) if email})


def _message(submission: Submission, to: str) -> mail.EmailMessage:
    results = list(submission.results.select_related("problem").order_by("problem__slug"))
    passed = sum(r.status == r.Status.PASSED for r in results)
    context = {
        "submission": submission,
        "results": results,
        "passed": passed,
        "url": settings.PKB_SITE_URL + reverse("submissions:detail", args=[submission.pk]),
    }
    # A ranked run is the default and says nothing more; the others say what they were.
    run = "" if submission.is_ranked else f" ({submission.get_mode_display().lower()} run)"
    subject = (
        f"Submission #{submission.pk}{run} judged: {passed} of {len(results)} passed"
        if submission.status == Submission.Status.DONE
        else f"Submission #{submission.pk}{run} failed"
    )
    body = render_to_string("submissions/mail/judged.txt", context)
    return mail.EmailMessage(subject, body, to=[to])


def submission_judged_mail(*, submission_id: int) -> int:
    """Mail each member of the submission's team who gave an email (one mail each, so that
    no one sees the others' addresses); returns how many went out.

    Called once the results are committed. It never raises: a mail server that is down or
    refuses costs the team its mail, never the recording (which is done by then anyway).
    """
    try:
        submission = Submission.objects.select_related("team").get(pk=submission_id)
        messages = [_message(submission, to) for to in _recipients(submission)]
        if not messages:
            return 0
        return mail.get_connection().send_messages(messages) or 0
    except Exception:
        logger.exception("submission %s: the 'judged' mail was not sent", submission_id)
        return 0
