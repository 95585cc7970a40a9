"""`manage.py submit_example`: a folder submitted as an example through the normal path."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command

from evaluator.host.profiles import PROFILES
from portal.accounts.models import Team
from portal.problems.services import problems_sync
from portal.submissions.models import Submission
from portal.submissions.services import SubmissionError, submission_create
from tests.portal.bundles import SOLUTION, solving, upload
from tests.portal.factories import SubmissionFactory

pytestmark = pytest.mark.django_db

LABEL = "Example: examples/fast"
REPO = Path(__file__).resolve().parents[3]


@pytest.fixture
def folder(tmp_path) -> Path:
    """A bundle folder as the repository's examples are: solutions, a helper, a README."""
    root = tmp_path / "fast"
    root.mkdir()
    (root / "all-reduce.py").write_text("from _kernels import X\n" + SOLUTION)
    (root / "all-gather.py").write_text(SOLUTION)
    (root / "_kernels.py").write_text("X = 1\n")
    (root / "README.md").write_text("Triton kernels.\n")
    (root / "__pycache__").mkdir()
    (root / "__pycache__" / "_kernels.cpython-311.pyc").write_bytes(b"\0junk")
    return root


def submit_example(*args: str) -> str:
    out = io.StringIO()
    call_command("submit_example", *args, stdout=out)
    return out.getvalue()


def stored_files() -> list[Path]:
    root = Path(settings.MEDIA_ROOT)
    return [p for p in root.rglob("*") if p.is_file()] if root.exists() else []


def test_it_zips_the_folder_and_queues_it_like_any_submission(
    admin, problems, folder, sent, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        out = submit_example(str(folder), "--label", LABEL)
    [submission] = Submission.objects.all()
    assert submission.example_label == LABEL and submission.is_example
    assert submission.user == admin and submission.team.name == "Examples"
    assert submission.status == Submission.Status.QUEUED
    assert submission.profile == settings.PKB_SUBMISSION_PROFILE
    assert submission.problems == ["all-gather", "all-reduce"]
    assert submission.bundle_name == "fast.zip"
    with zipfile.ZipFile(submission.bundle.open("rb")) as archive:
        assert sorted(archive.namelist()) == [
            "README.md",
            "_kernels.py",
            "all-gather.py",
            "all-reduce.py",
        ]
    [(request, queue)] = sent
    assert queue == PROFILES[submission.profile].queue
    assert request.submission_id == submission.pk and request.bundle() == (
        submission.bundle.open("rb").read()
    )
    assert f"example #{submission.pk}" in out and LABEL in out


def test_the_label_defaults_to_the_folder_and_a_team_is_reused(admin, team, problems, folder):
    team.memberships.create(user=admin)
    submit_example(str(folder) + "/")
    [submission] = Submission.objects.all()
    assert submission.example_label == f"Example: {folder.as_posix()}"
    assert submission.team == team and not Team.objects.filter(name="Examples").exists()


def test_a_bad_folder_is_refused_with_its_reason_and_nothing_is_stored(
    admin, problems, tmp_path, sent, django_capture_on_commit_callbacks
):
    bad = tmp_path / "broken"
    bad.mkdir()
    (bad / "no-such-problem.py").write_text(SOLUTION)
    with django_capture_on_commit_callbacks(execute=True):
        with pytest.raises(CommandError, match="no-such-problem"):
            submit_example(str(bad), "--label", LABEL)
    assert not Submission.objects.exists() and not Team.objects.exists()
    assert stored_files() == [] and sent == []


@pytest.mark.parametrize("name", ["missing", "a-file.py"])
def test_a_path_that_is_not_a_folder_is_refused(admin, problems, tmp_path, name):
    (tmp_path / "a-file.py").write_text(SOLUTION)
    with pytest.raises(CommandError, match="not a folder"):
        submit_example(str(tmp_path / name))
    assert not Submission.objects.exists()


def test_a_link_in_the_folder_is_refused(admin, problems, folder, tmp_path):
    (tmp_path / "secret.py").write_text("KEY = 1\n")
    (folder / "_secret.py").symlink_to(tmp_path / "secret.py")
    with pytest.raises(CommandError, match="links are not allowed"):
        submit_example(str(folder))
    assert not Submission.objects.exists()


def test_only_staff_submit_examples(alice, problems, folder):
    with pytest.raises(CommandError, match="not staff"):
        submit_example(str(folder), "--user", "alice")
    with pytest.raises(SubmissionError, match="Only staff"):
        submission_create(user=alice, upload=upload(solving("all-reduce")), example_label=LABEL)
    assert not Submission.objects.exists()


def test_without_a_superuser_it_says_whom_to_name(problems, folder):
    with pytest.raises(CommandError, match="pass --user"):
        submit_example(str(folder))


def test_an_example_is_outside_its_teams_quota(admin, team, problems, settings):
    team.memberships.create(user=admin)
    settings.PKB_MAX_ACTIVE_SUBMISSIONS = 1
    SubmissionFactory(team=team, user=admin)  # queued: the team's one active slot
    with pytest.raises(SubmissionError):
        submission_create(user=admin, upload=upload(solving("all-reduce")))
    shown = submission_create(user=admin, upload=upload(solving("all-reduce")), example_label=LABEL)
    assert shown.example_label == LABEL


def test_the_repositorys_symm_example_is_accepted_as_it_is(
    admin, sent, django_capture_on_commit_callbacks
):
    problems_sync()
    folder = REPO / "examples" / "symm"
    with django_capture_on_commit_callbacks(execute=True):
        submit_example(str(folder), "--label", "Example: examples/symm")
    [submission] = Submission.objects.examples()
    expected = sorted(p.stem for p in folder.glob("*.py") if not p.stem.startswith("_"))
    assert submission.problems == expected and len(sent) == 1
