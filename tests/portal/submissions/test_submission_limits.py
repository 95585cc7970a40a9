"""Per-team limits on submissions, enforced in submission_create (web form and API alike)."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from django.conf import settings
from django.urls import reverse
from django.utils import timezone

from portal.accounts.services import team_disqualify
from portal.submissions.models import Submission
from portal.submissions.selectors import team_submission_quota
from portal.submissions.services import SubmissionError, submission_create
from tests.portal.bundles import solving, upload
from tests.portal.factories import SubmissionFactory

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _limits(settings):
    settings.PKB_SUBMISSIONS_PER_DAY = 3
    settings.PKB_MAX_ACTIVE_SUBMISSIONS = 2


def _at(submission: Submission, moment) -> Submission:
    Submission.objects.filter(pk=submission.pk).update(created_at=moment)
    return submission


def _stored() -> list[Path]:
    root = Path(settings.MEDIA_ROOT)
    return sorted(p for p in root.rglob("*") if p.is_file()) if root.exists() else []


def test_the_quota_counts_the_last_24_hours_only(alice, team):
    now = timezone.now()
    _at(SubmissionFactory(team=team, user=alice, done=True), now - timedelta(hours=25))
    _at(SubmissionFactory(team=team, user=alice, done=True), now - timedelta(hours=2))
    quota = team_submission_quota(team, now=now)
    assert (quota.used, quota.limit, quota.remaining, quota.next_slot_at) == (1, 3, 2, None)
    assert quota.refusal() is None
    assert quota.summary.startswith("1 of 3 submissions used in the last 24 hours.")


def test_a_full_day_says_when_the_next_slot_opens(alice, team):
    now = timezone.now().replace(hour=12, minute=0, second=0, microsecond=0)
    oldest = now - timedelta(hours=23, minutes=55)  # leaves the window at 12:05
    for moment in (oldest, now - timedelta(hours=3), now - timedelta(hours=1)):
        _at(SubmissionFactory(team=team, user=alice, done=True), moment)
    quota = team_submission_quota(team, now=now)
    assert quota.next_slot_at == oldest + timedelta(hours=24)
    assert "next slot at 12:05 UTC (in 5 min)" in quota.summary
    assert quota.refusal() == (
        "Your team has used its 3 submissions of the last 24 hours; "
        "the next slot opens at 12:05 UTC (in 5 min)."
    )


def test_it_refuses_a_submission_over_the_daily_limit_and_keeps_nothing(
    alice, team, problems, sent, django_capture_on_commit_callbacks
):
    for _ in range(3):
        SubmissionFactory(team=team, user=alice, done=True)
    before = _stored()
    with pytest.raises(SubmissionError, match="used its 3 submissions of the last 24 hours"):
        with django_capture_on_commit_callbacks(execute=True):
            submission_create(user=alice, upload=upload(solving("all-reduce")))
    assert Submission.objects.count() == 3
    assert _stored() == before and sent == []


def test_it_refuses_more_active_submissions_than_allowed(alice, bob, team, problems, sent):
    SubmissionFactory(team=team, user=alice)
    SubmissionFactory(team=team, user=alice, running=True)
    with pytest.raises(SubmissionError, match="2 submissions queued or running, the most"):
        submission_create(user=bob, upload=upload(solving("all-reduce")))
    assert Submission.objects.count() == 2 and sent == []


def test_a_finished_submission_frees_its_active_slot(
    alice, team, problems, django_capture_on_commit_callbacks
):
    SubmissionFactory(team=team, user=alice)
    SubmissionFactory(team=team, user=alice, done=True)
    with django_capture_on_commit_callbacks(execute=True):
        created = submission_create(user=alice, upload=upload(solving("all-reduce")))
    assert created.status == Submission.Status.QUEUED


def test_limits_are_per_team(alice, team, charlie, problems, django_capture_on_commit_callbacks):
    for _ in range(3):
        SubmissionFactory(team=team, user=alice, done=True)
    with django_capture_on_commit_callbacks(execute=True):
        created = submission_create(user=charlie, upload=upload(solving("all-reduce")))
    assert created.team.name == "Charlie Ltd"


def test_the_limit_is_checked_before_the_bundle(alice, team, problems):
    for _ in range(3):
        SubmissionFactory(team=team, user=alice, done=True)
    with pytest.raises(SubmissionError, match="used its 3 submissions"):
        submission_create(user=alice, upload=upload(b"not an archive", "junk.zip"))


def test_a_disqualified_team_cannot_submit(alice, team, problems, sent):
    team_disqualify(team=team, reason="Patched the timer.")
    with pytest.raises(SubmissionError, match=r"disqualified \(Patched the timer.\)"):
        submission_create(user=alice, upload=upload(solving("all-reduce")))
    assert not Submission.objects.exists() and sent == []


def test_the_upload_form_shows_the_quota(client, alice, team):
    SubmissionFactory(team=team, user=alice, done=True)
    client.force_login(alice)
    body = client.get(reverse("submissions:submit")).content.decode()
    assert "1 of 3 submissions used in the last 24 hours" in body
    assert "At most 2 queued or running at once." in body


def test_the_upload_form_shows_the_refusal(client, alice, team, problems):
    for _ in range(3):
        SubmissionFactory(team=team, user=alice, done=True)
    client.force_login(alice)
    response = client.post(reverse("submissions:submit"), {"bundle": upload(solving("all-reduce"))})
    assert response.status_code == 400
    assert "used its 3 submissions of the last 24 hours" in response.content.decode()
    assert Submission.objects.count() == 3


def test_an_upload_that_lands_meanwhile_takes_the_last_slot_and_nothing_is_kept(
    alice, bob, team, problems, sent, monkeypatch
):
    """The limit is checked again under the team's lock: another upload of the team that
    is stored while this one's bundle is being checked wins the last slot."""
    from portal.submissions.services import submissions as service

    for _ in range(2):
        SubmissionFactory(team=team, user=alice, done=True)
    check = service._read_checked_bundle
    bobs = []

    def check_while_bob_submits(*args, **kwargs):
        bundle = check(*args, **kwargs)
        bobs.append(SubmissionFactory(team=team, user=bob))
        return bundle

    monkeypatch.setattr(service, "_read_checked_bundle", check_while_bob_submits)
    before = _stored()
    with pytest.raises(SubmissionError, match="used its 3 submissions"):
        submission_create(user=alice, upload=upload(solving("all-reduce")))
    assert Submission.objects.count() == 3
    assert set(_stored()) - set(before) == {Path(bobs[0].bundle.path)}
    assert sent == []
