"""Per-team limits on submissions, per mode, enforced in submission_create (web form and API
alike)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from django.conf import settings
from django.urls import reverse
from django.utils import timezone

from portal.accounts.services import team_disqualify
from portal.submissions.models import Submission
from portal.submissions.quotas import clock, team_submission_quota
from portal.submissions.services import SubmissionError, submission_create
from tests.portal.bundles import solving, upload
from tests.portal.factories import SubmissionFactory

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _limits(settings):
    settings.PKB_SUBMISSIONS_PER_DAY = 3
    settings.PKB_RANKED_RUNS_PER_HOUR = 0
    settings.PKB_TEST_RUNS_PER_HOUR = 2
    settings.PKB_TEST_RUNS_PER_DAY = 10
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
    quota = team_submission_quota(team, now=now)["ranked"]
    [day] = quota.windows  # ranked runs have no hourly limit here
    assert (day.used, day.limit, day.next_at, quota.full) == (1, 3, None, None)
    assert quota.refusal() is None
    assert quota.summary == "1 of 3 ranked runs used in the last 24 hours"


def test_a_full_day_says_when_the_next_slot_opens(alice, team):
    now = timezone.now().replace(hour=12, minute=0, second=0, microsecond=0)
    oldest = now - timedelta(hours=23, minutes=55)  # leaves the window at 12:05
    for moment in (oldest, now - timedelta(hours=3), now - timedelta(hours=1)):
        _at(SubmissionFactory(team=team, user=alice, done=True), moment)
    quota = team_submission_quota(team, now=now)
    assert quota["ranked"].next_at == oldest + timedelta(hours=24)
    assert quota["ranked"].summary == (
        "3 of 3 ranked runs used in the last 24 hours; next at 12:05 UTC (in 5 min)"
    )
    assert quota.refusal("ranked") == (
        "Your team has used 3 of 3 ranked runs in the last 24 hours; next at 12:05 UTC (in 5 min)."
    )
    assert quota.wait_s("ranked") == 5 * 60
    assert quota.refusal("test") is None  # each mode has its own quota


def test_an_hour_full_of_test_runs_says_when_the_next_one_may_start(alice, team):
    now = timezone.now().replace(hour=12, minute=0, second=0, microsecond=0)
    for minutes in (50, 20):
        moment = now - timedelta(minutes=minutes)
        _at(SubmissionFactory(team=team, user=alice, done=True, mode="test"), moment)
    _at(SubmissionFactory(team=team, user=alice, done=True, mode="test"), now - timedelta(hours=3))
    quota = team_submission_quota(team, now=now)
    assert quota["test"].summary == (
        "2 of 2 test runs used in the last hour, 3 of 10 in the last 24 hours; "
        "next at 12:10 UTC (in 10 min)"
    )
    assert quota.refusal("test") == (
        "Your team has used 2 of 2 test runs in the last hour; next at 12:10 UTC (in 10 min)."
    )
    assert quota["ranked"].summary == "0 of 3 ranked runs used in the last 24 hours"


def test_a_run_failed_through_the_platforms_fault_gives_its_slot_back(alice, team):
    for _ in range(3):
        SubmissionFactory(team=team, user=alice, done=True)
    Submission.objects.filter(pk=Submission.objects.first().pk).update(
        status=Submission.Status.FAILED, platform_fault=True
    )
    quota = team_submission_quota(team)
    assert quota.refusal("ranked") is None
    assert quota["ranked"].summary == "2 of 3 ranked runs used in the last 24 hours"


def test_it_refuses_a_submission_over_the_daily_limit_and_keeps_nothing(
    alice, team, problems, sent, django_capture_on_commit_callbacks
):
    for _ in range(3):
        SubmissionFactory(team=team, user=alice, done=True)
    before = _stored()
    with pytest.raises(SubmissionError, match="used 3 of 3 ranked runs in the last 24 hours"):
        with django_capture_on_commit_callbacks(execute=True):
            submission_create(user=alice, upload=upload(solving("all-reduce")))
    assert Submission.objects.count() == 3
    assert _stored() == before and sent == []


def test_a_team_out_of_ranked_runs_may_still_test(
    alice, team, problems, sent, django_capture_on_commit_callbacks
):
    for _ in range(3):
        SubmissionFactory(team=team, user=alice, done=True)
    with django_capture_on_commit_callbacks(execute=True):
        created = submission_create(user=alice, upload=upload(solving("all-reduce")), mode="test")
    assert created.mode == "test"
    [(request, _)] = sent
    assert request.mode == "test"


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
    with pytest.raises(SubmissionError, match="used 3 of 3 ranked runs"):
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
    assert "1 of 3 ranked runs used in the last 24 hours" in body
    assert "0 of 2 test runs used in the last hour, 0 of 10 in the last 24 hours" in body
    assert "At most 2 queued or running at once (0 now)." in body


def test_the_upload_form_shows_the_refusal(client, alice, team, problems):
    for _ in range(3):
        SubmissionFactory(team=team, user=alice, done=True)
    client.force_login(alice)
    response = client.post(reverse("submissions:submit"), {"bundle": upload(solving("all-reduce"))})
    assert response.status_code == 400
    assert "used 3 of 3 ranked runs in the last 24 hours" in response.content.decode()
    assert Submission.objects.count() == 3


def test_an_upload_that_lands_meanwhile_takes_the_last_slot_and_nothing_is_kept(
    alice, bob, team, problems, sent, monkeypatch
):
    """The limit is checked again under the team's lock: another upload of the team that
    is stored while this one's bundle is being checked wins the last slot."""
    from portal.submissions.services import submissions as service

    for _ in range(2):
        SubmissionFactory(team=team, user=alice, done=True)
    check = service.read_checked_bundle
    bobs = []

    def check_while_bob_submits(*args, **kwargs):
        bundle = check(*args, **kwargs)
        bobs.append(SubmissionFactory(team=team, user=bob))
        return bundle

    monkeypatch.setattr(service, "read_checked_bundle", check_while_bob_submits)
    before = _stored()
    with pytest.raises(SubmissionError, match="used 3 of 3 ranked runs"):
        submission_create(user=alice, upload=upload(solving("all-reduce")))
    assert Submission.objects.count() == 3
    assert set(_stored()) - set(before) == {Path(bobs[0].bundle.path)}
    assert sent == []


def test_a_slot_that_frees_tomorrow_says_the_day():
    now = datetime(2026, 11, 26, 23, 35, tzinfo=UTC)
    assert clock(now + timedelta(minutes=45), now) == "Nov 27 00:20 UTC (in 45 min)"
    assert clock(now + timedelta(minutes=20), now) == "23:55 UTC (in 20 min)"
