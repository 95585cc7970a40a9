"""A bare `<problem-slug>.py` is a one-file bundle, as the Submit page and the API say:
stored as uploaded, and read by the evaluator host the same way."""

from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from evaluator.intake.bundle import read_bundle
from portal.submissions.models import Submission
from tests.portal.api.conftest import token_client
from tests.portal.bundles import SOLUTION

pytestmark = pytest.mark.django_db


def _py(name: str = "all-reduce.py", text: str = SOLUTION) -> SimpleUploadedFile:
    return SimpleUploadedFile(name, text.encode(), content_type="text/x-python")


def test_the_submit_page_accepts_one_python_file(
    client, alice, problems, sent, django_capture_on_commit_callbacks
):
    client.force_login(alice)
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(reverse("submissions:submit"), {"bundle": _py()})
    submission = Submission.objects.get()
    assert response.status_code == 302
    assert submission.problems == ["all-reduce"]
    assert submission.bundle_name == "all-reduce.py"
    assert submission.bundle.name.endswith(".py")
    [(request, _)] = sent
    # The host reads the request's bundle as the portal did.
    bundle = read_bundle(request.bundle_name, request.bundle(), known_slugs=["all-reduce"])
    assert bundle.files == {"all-reduce.py": SOLUTION.encode()}


def test_the_api_accepts_one_python_file(alice, problems):
    response = token_client(alice).post(
        reverse("api:submissions"), {"bundle": _py()}, format="multipart"
    )
    assert response.status_code == 201
    assert response.json()["problems"] == ["all-reduce"]


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("solution.py", SOLUTION, "unknown problem 'solution'"),
        ("secret-op.py", SOLUTION, "Not open for submissions: secret-op"),
        ("all-reduce.py", "x = 1\n", "defines no top-level solution"),
        ("_helper.py", SOLUTION, "must be named <problem-slug>.py"),
    ],
)
def test_a_python_file_that_solves_nothing_open_is_refused(
    client, alice, problems, name, text, message
):
    client.force_login(alice)
    response = client.post(reverse("submissions:submit"), {"bundle": _py(name, text)})
    assert response.status_code == 400
    assert message in " ".join(response.context["form"].errors["bundle"])
    assert not Submission.objects.exists()
