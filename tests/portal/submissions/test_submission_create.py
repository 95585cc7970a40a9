from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from django.conf import settings
from django.core.files.uploadedfile import SimpleUploadedFile

from evaluator.host.profiles import PROFILES
from portal.submissions.models import Submission
from portal.submissions.services import SubmissionError, submission_create
from tests.portal.bundles import SOLUTION, solving, tar_bundle, upload, zip_bundle

pytestmark = pytest.mark.django_db


def stored_files() -> list[Path]:
    root = Path(settings.MEDIA_ROOT)
    return [p for p in root.rglob("*") if p.is_file()] if root.exists() else []


def test_it_stores_the_file_and_the_row_and_enqueues_after_commit(
    alice, team, problems, sent, django_capture_on_commit_callbacks
):
    data = solving("all-reduce", "tp-linear")
    with django_capture_on_commit_callbacks() as callbacks:
        submission = submission_create(user=alice, upload=upload(data, "mine.zip"))
        assert sent == []  # nothing leaves before the commit
    assert len(callbacks) == 1
    callbacks[0]()

    submission.refresh_from_db()
    assert submission.team == team and submission.user == alice
    assert submission.status == Submission.Status.QUEUED
    assert submission.problems == ["all-reduce", "tp-linear"]
    assert submission.bundle_name == "mine.zip"
    assert submission.bundle_sha256 == hashlib.sha256(data).hexdigest()
    assert submission.profile == settings.PKB_SUBMISSION_PROFILE
    assert submission.attempts == 1 and submission.queued_at is not None
    assert submission.bundle.name.startswith(f"submissions/{team.pk}/")
    assert submission.bundle.name.endswith(".zip")
    assert stored_files() == [Path(submission.bundle.path)]
    assert Path(submission.bundle.path).read_bytes() == data

    [(request, queue)] = sent
    assert queue == PROFILES[submission.profile].queue
    assert request.evaluation_id == str(submission.evaluation_id)
    assert request.submission_id == submission.pk
    assert request.problems == ["all-reduce", "tp-linear"]
    assert request.bundle() == data


def test_it_accepts_a_tar_gz(alice, problems, django_capture_on_commit_callbacks):
    data = tar_bundle({"all-gather.py": SOLUTION, "_helpers.py": "X = 1\n"})
    with django_capture_on_commit_callbacks(execute=True):
        submission = submission_create(user=alice, upload=upload(data, "b.tar.gz"))
    assert submission.problems == ["all-gather"]
    assert submission.bundle.name.endswith(".tar.gz")


BAD_BUNDLES = {
    "empty": (b"", "is empty"),
    "corrupt": (b"PK\x03\x04 this is not a zip at all", "corrupt"),
    "not an archive": (b"print('hello')\n", "not a .zip or .tar.gz"),
    "unknown slug": (zip_bundle({"no-such-problem.py": SOLUTION}), "unknown problem"),
    "syntax error": (zip_bundle({"all-reduce.py": "def solution(:\n"}), "all-reduce.py line 1"),
    "no solution": (zip_bundle({"all-reduce.py": "x = 1\n"}), "defines no top-level solution"),
    "hidden problem": (solving("all-reduce", "secret-op"), "Not open for submissions: secret-op"),
    "retired problem": (solving("old-op"), "Not open for submissions: old-op"),
}


@pytest.mark.parametrize("kind", BAD_BUNDLES)
def test_it_rejects_a_bad_bundle_and_keeps_nothing(
    alice, problems, sent, django_capture_on_commit_callbacks, kind
):
    data, message = BAD_BUNDLES[kind]
    with django_capture_on_commit_callbacks() as callbacks:
        with pytest.raises(SubmissionError, match=message):
            submission_create(user=alice, upload=upload(data))
    assert callbacks == [] and sent == []
    assert not Submission.objects.exists()
    assert stored_files() == []


def test_an_unknown_slug_gets_the_closest_published_slugs(alice, problems):
    with pytest.raises(SubmissionError) as caught:
        submission_create(user=alice, upload=upload(solving("all-reduse")))
    assert str(caught.value).endswith("did you mean all-reduce?")


def test_an_unknown_slug_message_never_names_unpublished_problems(alice, problems):
    for near_hidden in ("secret-opp", "old-opp"):
        with pytest.raises(SubmissionError) as caught:
            submission_create(user=alice, upload=upload(solving(near_hidden)))
        suggested = str(caught.value).replace(near_hidden, "")
        assert "unknown problem" in suggested
        assert "secret-op" not in suggested and "old-op" not in suggested


def test_it_rejects_an_oversized_upload_before_reading_it(alice, problems, settings):
    settings.PKB_BUNDLE_MAX_BYTES = 100

    class Unreadable(SimpleUploadedFile):
        def read(self, *args):
            raise AssertionError("an oversized upload must not be read")

    big = Unreadable("big.zip", solving("all-reduce") + b"\0" * 200)
    with pytest.raises(SubmissionError, match="larger than"):
        submission_create(user=alice, upload=big)
    assert not Submission.objects.exists()


def test_it_caps_what_it_reads_when_the_declared_size_lies(alice, problems, settings):
    settings.PKB_BUNDLE_MAX_BYTES = 100
    liar = upload(solving("all-reduce") + b"\0" * 200)
    liar.size = 10
    with pytest.raises(SubmissionError, match="larger than"):
        submission_create(user=alice, upload=liar)


def test_the_bundle_limit_is_the_evaluators(settings):
    from evaluator.intake.bundle import MAX_BUNDLE_BYTES

    assert settings.PKB_BUNDLE_MAX_BYTES == MAX_BUNDLE_BYTES
    assert settings.FILE_UPLOAD_MAX_MEMORY_SIZE == MAX_BUNDLE_BYTES


def test_a_user_without_a_team_cannot_submit(dana, problems):
    with pytest.raises(SubmissionError, match="Join or create a team"):
        submission_create(user=dana, upload=upload(solving("all-reduce")))
    assert not Submission.objects.exists()


def test_a_failure_while_saving_the_row_leaves_no_file(alice, problems, monkeypatch, sent):
    def broken_save(self, *args, **kwargs):
        raise RuntimeError("database went away")

    monkeypatch.setattr(Submission, "save", broken_save)
    with pytest.raises(RuntimeError, match="went away"):
        submission_create(user=alice, upload=upload(solving("all-reduce")))
    assert stored_files() == []
    assert sent == []


def test_a_broker_outage_is_logged_and_left_to_the_sweeper(
    alice, problems, monkeypatch, django_capture_on_commit_callbacks, caplog
):
    from portal.submissions import broker

    def down(request, *, queue):
        raise ConnectionError("redis is down")

    monkeypatch.setattr(broker, "send_evaluation", down)
    with django_capture_on_commit_callbacks(execute=True):
        submission = submission_create(user=alice, upload=upload(solving("all-reduce")))
    assert Submission.objects.get(pk=submission.pk).status == Submission.Status.QUEUED
    assert "redis is down" in caplog.text
