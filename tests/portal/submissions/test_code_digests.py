"""Code digests (issue 23): what "the same code" is per problem, taken at upload and filled
in for stored submissions by migration 0007."""

from __future__ import annotations

import uuid

import pytest
from django.core.files.base import ContentFile
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

from evaluator.intake.bundle import read_bundle
from portal.submissions.digests import code_digests, stored_code_digests, unique_digest
from portal.submissions.services import submission_create
from tests.portal.bundles import SOLUTION, tar_bundle, upload, zip_bundle
from tests.portal.factories import SubmissionFactory
from tests.portal.judging import finish, passed

SLUGS = {"all-reduce", "all-gather"}
HELPER = "import torch\n\ndef helper(x):\n    return x\n"


def digests(files: dict[str, str], *, tar: bool = False) -> dict[str, str]:
    data = tar_bundle(files) if tar else zip_bundle(files)
    return code_digests(read_bundle("b.tar.gz" if tar else "b.zip", data, known_slugs=SLUGS))


BASE = {"all-reduce.py": SOLUTION, "all-gather.py": SOLUTION, "_helper.py": HELPER}


def test_comments_blank_lines_and_packing_are_the_same_code():
    noted = {
        "all-reduce.py": "# a note\n\n" + SOLUTION.replace("x.clone()", "x.clone()  # done"),
        "all-gather.py": SOLUTION,
        "_helper.py": HELPER.replace("\n\n", "\n\n\n"),
    }
    assert digests(noted) == digests(BASE)
    assert digests(BASE, tar=True) == digests(BASE)
    documented = {**BASE, "_helper.py": '"""A docstring is a value, so code."""\n' + HELPER}
    assert digests(documented)["all-reduce"] != digests(BASE)["all-reduce"]


def test_a_helper_or_a_source_file_changes_every_problems_code():
    changed = {**BASE, "_helper.py": HELPER.replace("return x", "return x * 1")}
    assert digests(changed).keys() == digests(BASE).keys() == SLUGS
    assert all(digests(changed)[s] != digests(BASE)[s] for s in SLUGS)
    with_cuda = {**BASE, "kernels/add.cu": "__global__ void add() {}\n"}
    edited = {**BASE, "kernels/add.cu": "__global__ void add() { }\n"}
    assert digests(with_cuda)["all-reduce"] != digests(edited)["all-reduce"]


def test_another_problems_solution_is_not_part_of_a_problems_code():
    changed = {**BASE, "all-gather.py": "def solution(x):\n    return x + 0\n"}
    assert digests(changed)["all-reduce"] == digests(BASE)["all-reduce"]
    assert digests(changed)["all-gather"] != digests(BASE)["all-gather"]


@pytest.mark.django_db
def test_an_upload_stores_its_digests_and_its_results_copy_them(alice, problems):
    submission = submission_create(user=alice, upload=upload(zip_bundle(BASE)))
    assert submission.code_digests == digests(BASE)
    assert finish(submission.evaluation_id, passed())
    [result] = submission.results.all()
    assert result.code_digest == submission.code_digests["all-reduce"]


@pytest.mark.django_db
def test_a_stored_bundle_that_cannot_be_read_gets_digests_of_its_own(alice, team, problems):
    broken = SubmissionFactory(team=team, user=alice, problems=["all-reduce"])
    broken.bundle.save("x.zip", ContentFile(b"not a zip"), save=True)
    assert stored_code_digests(broken) == {"all-reduce": unique_digest(broken.pk, "all-reduce")}
    other = SubmissionFactory(team=team, user=alice, problems=["all-reduce"])
    assert unique_digest(other.pk, "all-reduce") != unique_digest(broken.pk, "all-reduce")


# migration 0007

BEFORE = [("submissions", "0006_example_label")]
AFTER = [("submissions", "0007_code_digests")]


def migrate(targets):
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    return executor.loader.project_state(targets).apps


@pytest.fixture
def back_to_latest():
    yield
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())


@pytest.mark.django_db(transaction=True)
def test_the_migration_fills_digests_from_stored_bundles(alice, team, problems, back_to_latest):
    apps = migrate(BEFORE)
    Submission = apps.get_model("submissions", "Submission")
    ProblemResult = apps.get_model("submissions", "ProblemResult")
    made = []
    for name, data in (("a.zip", zip_bundle(BASE)), ("gone.zip", None)):
        submission = Submission(
            team_id=team.pk,
            user_id=alice.pk,
            bundle_name=name,
            bundle_sha256="0" * 64,
            profile="cpu",
            problems=["all-gather", "all-reduce"],
            status="done",
            evaluation_id=uuid.uuid4(),
            finished_at=timezone.now(),
        )
        if data is not None:
            submission.bundle.save(name, ContentFile(data), save=False)
        else:
            submission.bundle.name = "submissions/gone.zip"  # the file is missing
        submission.save()
        ProblemResult.objects.create(
            submission=submission, problem_id=problems["all-reduce"].pk, status="passed"
        )
        made.append(submission.pk)

    apps = migrate(AFTER)
    Submission = apps.get_model("submissions", "Submission")
    ProblemResult = apps.get_model("submissions", "ProblemResult")
    stored, gone = (Submission.objects.get(pk=pk) for pk in made)
    assert stored.code_digests == digests(BASE)
    assert gone.code_digests == {s: unique_digest(gone.pk, s) for s in sorted(SLUGS)}
    for submission in (stored, gone):
        result = ProblemResult.objects.get(submission_id=submission.pk)
        assert result.code_digest == submission.code_digests["all-reduce"]
