"""One budget per team (issue 51): an entry's samples are ranked runs of its team, counted
in its ranked windows and its runs at once like any upload, and a team registers a bounded
number of entries; /api/quota/, `pkb quota` and the Submit page show it all."""

from __future__ import annotations

import pytest

from portal.entries.models import Entry
from portal.entries.services import EntryError, entry_register
from portal.submissions.models import Submission
from portal.submissions.quotas import team_submission_quota
from portal.submissions.services import SubmissionError, submission_create
from tests.portal.bundles import solving, upload
from tests.portal.entries.helpers import send

pytestmark = pytest.mark.django_db


def _register(user, name: str) -> Entry:
    return entry_register(user=user, name=name, kind="model", model_name="m",
                          samples_per_problem=3, k=1)  # fmt: skip


def test_samples_count_in_the_teams_runs_at_once_and_ranked_windows(alice, team, entry):
    send(alice, entry, *[solving("all-reduce")] * 3)
    quota = team_submission_quota(team)
    assert quota.active == 3
    assert {window.used for window in quota["ranked"].windows} == {3}


def test_a_batch_past_the_teams_runs_at_once_is_refused_and_keeps_nothing(alice, entry, settings):
    settings.PKB_MAX_ACTIVE_SUBMISSIONS = 2
    with pytest.raises(EntryError, match=r"may have 2 at once.*Send at most 2 now"):
        send(alice, entry, *[solving("all-reduce")] * 3)
    assert not Submission.objects.exists() and not entry.samples.exists()


def test_an_upload_is_refused_while_samples_fill_the_teams_slots(alice, entry, settings):
    settings.PKB_MAX_ACTIVE_SUBMISSIONS = 2
    send(alice, entry, solving("all-reduce"), solving("all-gather"))
    with pytest.raises(SubmissionError, match="2 submissions queued or running"):
        submission_create(user=alice, upload=upload(solving("all-reduce")))


def test_samples_use_the_teams_ranked_runs_of_the_day(alice, entry, settings):
    settings.PKB_SUBMISSIONS_PER_DAY = 3
    submission_create(user=alice, upload=upload(solving("all-reduce")))
    with pytest.raises(EntryError, match=r"used 1 of 3 ranked runs in the last 24 hours"):
        send(alice, entry, *[solving("all-gather")] * 3)
    send(alice, entry, solving("all-gather"), solving("all-gather"))
    with pytest.raises(SubmissionError, match="used 3 of 3 ranked runs"):
        submission_create(user=alice, upload=upload(solving("all-reduce")))


def test_a_team_registers_a_bounded_number_of_entries(alice, bob, problems, settings):
    settings.PKB_MAX_ENTRIES_PER_TEAM = 2
    _register(alice, "One")
    _register(bob, "Two")
    with pytest.raises(EntryError, match="registered 2 entries, the most a team may"):
        _register(alice, "Three")
    assert Entry.objects.count() == 2


def test_the_quota_api_shows_the_one_budget(alice, alice_api, entry, settings):
    settings.PKB_MAX_ENTRIES_PER_TEAM = 4
    send(alice, entry, solving("all-reduce"), solving("all-gather"))
    data = alice_api.get("/api/quota/").json()
    assert (data["active"], data["entries"], data["entries_limit"]) == (2, 1, 4)
    ranked = next(m for m in data["modes"] if m["mode"] == "ranked")
    assert ranked["summary"].startswith("2 of 20 ranked runs used")


def test_the_submit_page_shows_the_entries_and_the_runs_at_once(client, alice, entry):
    send(alice, entry, solving("all-reduce"))
    client.force_login(alice)
    page = client.get("/submit/").content.decode()
    assert "(1 now)" in page and "1 of 5 model or agent entries registered" in page
