"""The upload fuzzer through the real views: malformed archives posted to the Submit page
and to the API are refused with a message, never a server error, and nothing is stored.

The bundle checks themselves see every generated upload in tests/redteam/test_upload_fuzz.py;
here a sample of each kind goes through both endpoints (the form, the service, the
database, the API's error format). PKB_FUZZ_SEED picks another run.
"""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

import pytest
from django.conf import settings
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from portal.api.services import api_token_create
from portal.api.throttling import UserRateThrottle
from portal.entries.services import entry_register
from portal.submissions.models import Submission
from tests.evaluator.malformed import MALFORMED_KINDS, Malformed, malformed_uploads

pytestmark = pytest.mark.django_db

SEED = int(os.environ.get("PKB_FUZZ_SEED", "20261123"))
PER_KIND = 10  # per endpoint: 310 uploads each, every kind in both


def _sample() -> list[Malformed]:
    uploads = malformed_uploads(seed=SEED, count=PER_KIND * len(MALFORMED_KINDS))
    assert Counter(u.kind for u in uploads) == dict.fromkeys(MALFORMED_KINDS, PER_KIND)
    return uploads


def _file(upload: Malformed) -> SimpleUploadedFile:
    return SimpleUploadedFile(upload.filename, upload.data, content_type="application/zip")


def _stored_files() -> list[Path]:
    root = Path(settings.MEDIA_ROOT)
    return [p for p in root.rglob("*") if p.is_file()] if root.exists() else []


@pytest.fixture
def api_client(alice, monkeypatch) -> APIClient:
    # Hundreds of posts in a minute: the per-user rate would answer 429 before the checks.
    monkeypatch.setattr(UserRateThrottle, "rate", "100000/min", raising=False)
    _, secret = api_token_create(user=alice, name="fuzzer")
    client = APIClient(raise_request_exception=False)
    client.credentials(HTTP_AUTHORIZATION=f"Token {secret}")
    return client


@pytest.fixture
def form_client(alice) -> Client:
    client = Client(raise_request_exception=False)
    client.force_login(alice)
    return client


def test_malformed_uploads_get_a_form_error_and_store_nothing(form_client, problems, sent):
    wrong = []
    for upload in _sample():
        response = form_client.post(reverse("submissions:submit"), {"bundle": _file(upload)})
        errors = response.context["form"].errors.get("bundle") if response.context else None
        if response.status_code != 400 or not errors:
            wrong.append((upload.kind, upload.filename, response.status_code))
    assert wrong == [], f"seed {SEED}"
    assert not Submission.objects.exists() and sent == []
    assert _stored_files() == []


def test_malformed_uploads_get_a_400_with_a_json_error_and_store_nothing(
    api_client, problems, sent
):
    wrong = []
    for upload in _sample():
        response = api_client.post(
            reverse("api:submissions"), {"bundle": _file(upload)}, format="multipart"
        )
        body = response.json() if response["Content-Type"] == "application/json" else {}
        if response.status_code != 400 or not body.get("bundle"):
            wrong.append((upload.kind, upload.filename, response.status_code))
    assert wrong == [], f"seed {SEED}"
    assert not Submission.objects.exists() and sent == []
    assert _stored_files() == []


def test_malformed_samples_of_an_entry_get_a_400_and_store_nothing(
    api_client, alice, problems, sent
):
    """The same uploads as an entry's samples, one batch each: the batch is refused with the
    sample's damage, and no submission, sample or file is kept."""
    entry = entry_register(user=alice, name="Fuzz Model", kind="model", model_name="m",
                           samples_per_problem=2, k=1)  # fmt: skip
    url = reverse("api:entry-samples", args=[entry.slug])
    wrong = []
    for upload in _sample():
        response = api_client.post(url, {"samples": [_file(upload)]}, format="multipart")
        body = response.json() if response["Content-Type"] == "application/json" else {}
        if response.status_code != 400 or "Sample 1 of the batch" not in str(body.get("samples")):
            wrong.append((upload.kind, upload.filename, response.status_code))
    assert wrong == [], f"seed {SEED}"
    assert not Submission.objects.exists() and not entry.samples.exists() and sent == []
    assert _stored_files() == []
