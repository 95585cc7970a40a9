"""Entries: registering, batches of samples, refusals, scores, and their rows on the boards."""

from __future__ import annotations

import pytest

from portal.entries.models import Entry, EntryAttempt, EntrySample
from portal.entries.selectors import entry_status
from portal.entries.services import EntryError, entry_register
from portal.leaderboard import freshness
from portal.leaderboard.selectors import build_leaderboard, problem_board
from portal.submissions.models import Submission
from tests.portal.entries.helpers import judge, passed, send, solving, three_samples, wrong
from tests.portal.judging import judged

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _fresh_boards():
    freshness.forget()


def register(user, **kwargs):
    fields = {"name": "GPT Kernels", "kind": "model", "model_name": "gpt"}
    fields.update(kwargs)
    fields.setdefault("samples_per_problem", 4)
    fields.setdefault("k", 2)
    return entry_register(user=user, **fields)


# registering


def test_a_member_registers_an_entry_of_her_team(alice, team, entry):
    assert entry.team == team and entry.slug == "claude-kernels"
    assert (entry.n, entry.k, entry.kind) == (3, 2, "model")


@pytest.mark.parametrize(
    ("fields", "words"),
    [
        ({"samples_per_problem": 2, "k": 3}, "at most the samples per problem"),
        ({"samples_per_problem": 21, "k": 1}, "at most 20 samples per problem"),
        ({"kind": "robot"}, "kind must be one of"),
        ({"name": "Claude kernels"}, "exists already"),
    ],
)
def test_a_bad_declaration_is_refused(alice, entry, fields, words):
    with pytest.raises(EntryError, match=words):
        register(alice, **fields)


def test_someone_without_a_team_registers_nothing(dana, problems):
    with pytest.raises(EntryError, match="Join or create a team"):
        register(dana)
    assert not Entry.objects.exists()


# samples


def test_a_batch_stores_one_ranked_submission_per_sample_and_numbers_the_attempts(
    alice, entry, sent, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        batch = send(alice, entry, solving("all-reduce", "all-gather"), solving("all-reduce"))
    samples = list(batch.samples.order_by("number"))
    assert [s.number for s in samples] == [1, 2]
    assert all(s.submission.status == Submission.Status.QUEUED for s in samples)
    attempts = EntryAttempt.objects.filter(entry=entry).order_by("problem__slug", "number")
    assert [(a.problem.slug, a.number, a.sample.number) for a in attempts] == [
        ("all-gather", 1, 1),
        ("all-reduce", 1, 1),
        ("all-reduce", 2, 2),
    ]
    # Each bundle is queued for the hosts like any other, once the batch is committed.
    assert sorted(request.submission_id for request, _ in sent) == [
        s.submission_id for s in samples
    ]


def test_extra_samples_beyond_the_declared_n_are_refused_and_nothing_is_kept(
    alice, entry, settings
):
    send(alice, entry, solving("all-reduce"), solving("all-reduce"))
    with pytest.raises(EntryError) as refused:
        send(alice, entry, solving("all-reduce"), solving("all-reduce", "all-gather"))
    message = str(refused.value)
    assert "declared 3 samples per problem" in message
    assert "all-reduce (2 sent, 2 more)" in message and "Nothing of the batch was kept" in message
    assert EntrySample.objects.count() == 2 and Submission.objects.count() == 2
    stored = list((settings.MEDIA_ROOT / "submissions").rglob("*.zip"))
    assert len(stored) == 2


def test_a_batch_with_a_bad_bundle_keeps_nothing(alice, entry):
    with pytest.raises(EntryError, match=r"Sample 2 of the batch \(sample_2.zip\): .*secret-op"):
        send(alice, entry, solving("all-reduce"), solving("secret-op"))
    assert not Submission.objects.exists()


def test_a_batch_larger_than_n_is_refused(alice, entry):
    with pytest.raises(EntryError, match="at most the entry's 3 samples"):
        send(alice, entry, *[solving("all-gather")] * 4)


def test_another_team_cannot_send_samples_for_the_entry(charlie, entry):
    with pytest.raises(EntryError, match="belongs to another team"):
        send(charlie, entry, solving("all-reduce"))
    assert not Submission.objects.exists()


def test_the_entry_quota_refuses_past_its_samples_per_day(alice, entry, settings):
    settings.PKB_ENTRY_SAMPLES_PER_DAY = 3
    send(alice, entry, solving("all-reduce"), solving("all-gather"))
    with pytest.raises(EntryError, match="may send 3 samples in any 24 hours and has sent 2"):
        send(alice, entry, solving("tp-linear"), solving("tp-linear"))


# scores


def test_scores_use_the_unbiased_estimator_over_the_judged_samples(alice, entry):
    three_samples(alice, entry)
    scores = entry_status(entry, profile="cpu").scores
    # all-reduce: n=3, c=2, f=1 (the 1.02x pass has its interval reaching below 1); the two
    # other published problems have no sample and count 0.
    (problem,) = scores.problems
    assert (problem.n, problem.c, problem.f) == (3, 2, 1)
    assert scores.pass_at_1 == pytest.approx((2 / 3) / 3)
    assert scores.pass_at_k == pytest.approx(1.0 / 3)  # 1 - C(1,2)/C(3,2): one failure only
    assert scores.fast_1_at_1 == pytest.approx((1 / 3) / 3)
    assert scores.fast_1_at_k == pytest.approx((2 / 3) / 3)  # 1 - C(2,2)/C(3,2)
    assert scores.complete


def test_scores_wait_while_a_problem_has_fewer_than_k_judged(alice, entry):
    batch = send(alice, entry, solving("all-reduce"), solving("all-reduce"))
    judge(batch.samples.get(number=1), passed("all-reduce"))
    scores = entry_status(entry, profile="cpu").scores
    assert scores.pass_at_1 == pytest.approx(1 / 3)  # pass@1 from the one judged
    assert scores.pass_at_k is None and not scores.complete


def test_a_flagged_pass_counts_as_a_failure(alice, entry):
    batch = send(alice, entry, solving("all-reduce"))
    judge(batch.samples.get(), passed("all-reduce", 40.0, 39.0, 41.0, flags=["below_floor"]))
    status = entry_status(entry, profile="cpu")
    assert [a.outcome for a in status.attempts] == ["flagged"]
    assert status.scores.pass_at_1 == 0.0


# boards


def test_an_entrys_samples_never_count_as_its_teams_results(alice, team, entry, problems):
    three_samples(alice, entry)
    people = build_leaderboard(profile="cpu", who="people")
    assert [r.team_name for r in people.rows if r.is_ranked] == []
    assert problem_board(problem=problems["all-reduce"], profile="cpu").ranking == []


def test_the_board_shows_the_entry_as_one_sample_per_problem_with_its_kind(
    alice, bob, team, entry, charlie, charlie_team
):
    three_samples(alice, entry)
    judged(team=charlie_team, user=charlie, speedup=1.2)
    board = build_leaderboard(profile="cpu")
    rows = {r.team_name: r for r in board.rows if r.is_ranked}
    assert set(rows) == {"Claude Kernels", "Charlie Ltd"}
    row = rows["Claude Kernels"]
    assert (row.is_entry, row.entry_kind, row.entry_slug) == (True, "model", "claude-kernels")
    assert row.score.fast_0 == pytest.approx((2 / 3) / 3)  # pass@1
    assert row.score.fast_1 == pytest.approx((1 / 3) / 3)  # fast_1@1
    assert row.score.solved == 1  # 2/3 of a problem, the expected count, rounded
    # Charlie's one problem at 1.2x (1.15-1.25): fast_1 1/3, above the entry's 1/9.
    assert rows["Charlie Ltd"].rank == 1 and row.rank == 2
    models = build_leaderboard(profile="cpu", who="models")
    assert [r.team_name for r in models.rows if r.is_ranked] == ["Claude Kernels"]


def test_a_disqualified_teams_entry_leaves_the_boards(alice, team, entry):
    three_samples(alice, entry)
    team.disqualified_at = team.created_at
    team.save()
    assert not [r for r in build_leaderboard(profile="cpu").rows if r.is_entry]


def test_a_wrong_answer_only_entry_shows_with_zero(alice, entry):
    batch = send(alice, entry, solving("all-gather"))
    judge(batch.samples.get(), wrong("all-gather"))
    (row,) = [r for r in build_leaderboard(profile="cpu").rows if r.is_entry]
    assert row.score.fast_0 == 0.0 and row.score.geomean is None


def test_a_batch_that_fails_while_stored_leaves_no_file_behind(alice, entry, settings, monkeypatch):
    from portal.entries import services

    real = services._store_sample

    def fail_on_the_second(*args, number, **kwargs):
        if number == 2:
            raise RuntimeError("the disk is full")
        return real(*args, number=number, **kwargs)

    monkeypatch.setattr(services, "_store_sample", fail_on_the_second)
    with pytest.raises(RuntimeError):
        send(alice, entry, solving("all-reduce"), solving("all-gather"))
    assert not Submission.objects.exists() and not EntrySample.objects.exists()
    assert not list((settings.MEDIA_ROOT / "submissions").rglob("*.zip"))


def test_the_board_reads_the_entries_in_constant_queries(alice, team, problems):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    counts = []
    for size in (1, 4):
        while Entry.objects.count() < size:
            made = register(alice, name=f"Model {Entry.objects.count()}", samples_per_problem=3)
            three_samples(alice, made)
        with CaptureQueriesContext(connection) as queries:
            build_leaderboard(profile="cpu")
        counts.append(len(queries))
    # problems, counted results, entries, their attempts with their results
    assert counts == [4, 4]


def test_the_problem_page_shows_the_entries_beside_the_ranking(client, alice, entry):
    three_samples(alice, entry)
    page = client.get("/problems/all-reduce/").content.decode()
    assert 'id="problem-entries"' in page and 'data-entry="claude-kernels"' in page
    assert "67%" in page  # pass@1: 2 of 3
    assert client.get("/problems/all-gather/").content.decode().count("problem-entries") == 0
