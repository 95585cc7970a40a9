"""Model and agent entries as people see them: registering one, its badge and the people /
models / all filter on the board, its page and a sample's, and the dataset's download."""

from __future__ import annotations

import csv
import io

import pytest
from django.contrib.auth import get_user_model

from portal.accounts.services import team_create
from portal.entries.models import Entry
from portal.entries.services import entry_samples_submit
from portal.problems.services import problems_sync
from tests.portal.bundles import solving, upload
from tests.portal.judging import finish, judged, passed

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

PASSWORD = "correct-horse-battery-9"


def _log_in(page, username: str) -> None:
    page.goto("/accounts/login/")
    page.locator("#id_username").fill(username)
    page.locator("#id_password").fill(PASSWORD)
    page.locator("form button[type=submit]").click()
    page.get_by_text(username, exact=True).first.wait_for()


@pytest.fixture
def people(settings, tmp_path):
    """alice (Alice's Kernels, which evaluates a model) and charlie (Charlie Ltd, people)."""
    settings.MEDIA_ROOT = tmp_path / "media"
    problems_sync()
    users = get_user_model().objects
    alice = users.create_user("alice", password=PASSWORD)
    charlie = users.create_user("charlie", password=PASSWORD)
    team_create(owner=alice, name="Alice's Kernels")
    charlies = team_create(owner=charlie, name="Charlie Ltd")
    judged(team=charlies, user=charlie, speedup=1.2)
    return alice


def _judge_samples(alice, entry: Entry) -> None:
    uploads = [upload(solving("all-reduce"), f"sample_{i}.zip") for i in (1, 2)]
    batch = entry_samples_submit(user=alice, entry=entry, uploads=uploads)
    first, second = batch.samples.order_by("number")
    environment = {"evaluator": "0.1.0+abc123def456", "torch": "2.13.0", "python": "3.11.2",
                   "hostname": "judge-7.internal", "world_size": 4}  # fmt: skip
    for sample, speedup in ((first, 1.5), (second, 0.8)):
        message = passed("all-reduce", speedup, speedup - 0.05, speedup + 0.05)
        assert finish(sample.submission.evaluation_id, message)
        sample.submission.__class__.objects.filter(pk=sample.submission_id).update(
            environment=environment
        )


def test_a_team_registers_a_model_entry_and_finds_it_on_the_board(page, people, screenshot):
    _log_in(page, "alice")
    page.goto("/entries/")
    page.locator("#new-entry").click()
    page.locator("#id_name").fill("Claude Kernels")
    page.locator("#id_kind").select_option("model")
    page.locator("#id_model_name").fill("claude")
    page.locator("#id_samples_per_problem").fill("2")
    page.locator("#id_k").fill("2")
    page.get_by_role("button", name="Register").click()
    page.locator("#declared").wait_for()
    assert "n = 2 samples per problem, k = 2" in page.locator("#declared").inner_text()
    _judge_samples(people, Entry.objects.get(slug="claude-kernels"))

    page.goto("/")
    entry_row = page.locator("#leaderboard tr[data-entry=claude-kernels]")
    entry_row.wait_for()
    assert entry_row.locator(".badge.entry-kind").inner_text() == "model"
    # pass@1: both samples passed all-reduce (one of them not beyond noise faster than the
    # reference): one problem of the 97 published.
    assert entry_row.locator("td.fast-0").inner_text().startswith("1%")
    assert page.locator("#leaderboard tr[data-team=charlie-ltd]").count() == 1
    screenshot("leaderboard-entries")

    page.locator("#who-switcher [data-who=models]").click()
    page.locator("#who-switcher [data-who=models][aria-current=page]").wait_for()
    assert page.locator("#leaderboard tr[data-entry=claude-kernels]").count() == 1
    assert page.locator("#leaderboard tr[data-team=charlie-ltd]").count() == 0
    page.locator("#who-switcher [data-who=people]").click()
    page.locator("#who-switcher [data-who=people][aria-current=page]").wait_for()
    assert page.locator("#leaderboard tr[data-entry]").count() == 0
    assert page.locator("#leaderboard tr[data-team=charlie-ltd]").count() == 1

    with page.expect_download() as download:
        page.locator("#export-csv").click()
    rows = list(csv.DictReader(io.StringIO(open(download.value.path()).read())))
    assert [r["team"] for r in rows] == ["charlie-ltd"]  # the people's rows only, as shown


def test_the_entry_and_sample_pages_say_how_to_re_run_it(page, people, screenshot):
    from portal.entries.services import entry_register

    entry = entry_register(
        user=people, name="Claude Kernels", kind="agent", model_name="claude",
        harness="swe-loop", samples_per_problem=2, k=2,
    )  # fmt: skip
    _judge_samples(people, entry)
    page.goto("/entries/claude-kernels/")
    scores = page.locator("#entry-scores")
    scores.first.wait_for()
    assert scores.first.locator("td.pass-1").inner_text() == "1%"  # 1 of 97 problems
    assert scores.first.locator("td.fast-1-1").inner_text() == "1%"  # 1/2 of 97: 0.5%
    row = page.locator("#entry-problems tr[data-problem=all-reduce] td")
    # sent, n, c, faster than 1; pass@1, pass@2, fast_1@1, fast_1@2 = 1 - C(1,2)/C(2,2)
    assert row.all_inner_texts()[1:] == ["2", "2", "2", "1", "100%", "100%", "50%", "100%"]
    assert "swe-loop" in page.locator("#entry-facts").inner_text()
    screenshot("entry")
    page.locator("#entry-samples a", has_text="sample 1").click()
    reproduce = page.locator("#reproduce")
    reproduce.wait_for()
    text = reproduce.inner_text()
    assert "0.1.0+abc123def456" in text and "2.13.0" in text and "CPU" in text
    assert "judge-7.internal" not in page.content()  # the site's machines stay unnamed
    assert page.locator("#sample-results td.problem-version").first.inner_text() == "1"
    screenshot("entry-sample")
