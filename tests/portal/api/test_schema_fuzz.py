"""schemathesis against the API's own OpenAPI schema (/api/schema/), in process: for every
operation, requests generated from the schema, valid and invalid, with a team token and
without. No response may be a server error, and every status code, body and content type
must be the documented one (the 400/401/404/429 that DRF sends on its own included).

Bounded: MAX_EXAMPLES per operation and test, about 30 s on 2 cores in all.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import schemathesis
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from hypothesis import HealthCheck, settings
from schemathesis.checks import positive_data_acceptance

from evaluator.contract import ARTIFACT_MEDIA_TYPES, EvaluationOutcome, finished_message
from evaluator.contract import Artifact as Made
from portal.api.services import api_token_create
from portal.api.throttling import AnonRateThrottle, UserRateThrottle
from portal.entries.services import entry_register
from portal.submissions.services import evaluation_finish
from portal.wsgi import application
from tests.portal.entries.helpers import three_samples
from tests.portal.factories import ProblemResultFactory, SubmissionFactory
from tests.portal.judging import passed

MAX_EXAMPLES = 15


@pytest.fixture
def api_schema(db, alice, team, problems, monkeypatch) -> Iterator[None]:
    # The WSGI app runs inside the test's transaction: Django closes connections at each
    # request's end, which would end it, so the signal is off as the test client does it.
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    try:
        # Hundreds of requests in seconds: the rates would answer 429 to most of them.
        for throttle in (UserRateThrottle, AnonRateThrottle):
            monkeypatch.setattr(throttle, "rate", "1000000/min", raising=False)
        submission = SubmissionFactory(team=team, user=alice, done=True)
        ProblemResultFactory(submission=submission, problem=problems["all-reduce"])
        yield
    finally:
        request_started.connect(close_old_connections)
        request_finished.connect(close_old_connections)


@pytest.fixture
def token_header(alice) -> dict[str, str]:
    return {"Authorization": f"Token {api_token_create(user=alice, name='schemathesis')[1]}"}


# Read from the site itself at collection: the view needs no database.
schema = schemathesis.openapi.from_wsgi("/api/schema/?format=json", application)


# Derandomized, with no example database: the same examples on every run and machine, so
# a failure is a bug to fix, never a flake (and nothing is written into the checkout).
BOUNDED = settings(
    max_examples=MAX_EXAMPLES,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def _excluded(case) -> list:
    # A bundle that schemathesis makes up is random bytes: the upload is refused (400) even
    # when the request is schema-valid, so "valid data is accepted" cannot hold there.
    if case.method == "POST" and case.path == "/api/submissions/":
        return [positive_data_acceptance]
    # The same for an entry's samples; and an entry's declaration has rules across fields
    # (k at most n, a name not taken) that a schema cannot say.
    if case.method == "POST" and case.path in ("/api/entries/", "/api/entries/{slug}/samples/"):
        return [positive_data_acceptance]
    return []


@schema.parametrize()
@BOUNDED
def test_the_api_answers_a_team_token_as_its_schema_says(case, api_schema, token_header):
    case.call_and_validate(headers=token_header, excluded_checks=_excluded(case))


@schema.parametrize()
@BOUNDED
def test_the_api_answers_anonymous_clients_as_its_schema_says(case, api_schema):
    case.call_and_validate(excluded_checks=_excluded(case))


# Generated ids and names never hit a real artifact or entry, so their 200s were never held
# to the schema (the artifact's media types disagreed with it: issue 51). Real ones here.


@pytest.fixture
def artifacts(api_schema, team, alice) -> dict[str, str]:
    """One artifact of each of the contract's media types: {media type: name}."""
    names = {media: f"a{i}.txt" for i, media in enumerate(ARTIFACT_MEDIA_TYPES)}
    submission = SubmissionFactory(team=team, user=alice, running=True, mode="profile")
    data = {"application/json": b'{"traceEvents": []}'}  # the others: text
    made = [Made.build(name=n, media_type=m, data=data.get(m, b"k,1\n")) for m, n in names.items()]
    message = finished_message(
        evaluation_id=str(submission.evaluation_id),
        outcome=EvaluationOutcome.DONE,
        results=[passed("all-reduce", 1.2)],
        artifacts=made,
    )
    assert evaluation_finish(message=message)
    return {media: f"{submission.pk}/{name}" for media, name in names.items()}


def test_each_kind_of_artifact_answers_as_its_schema_says(artifacts, token_header):
    operation = schema["/api/submissions/{id}/artifacts/{name}/"]["GET"]
    for media, where in artifacts.items():
        pk, name = where.split("/")
        case = operation.Case(path_parameters={"id": int(pk), "name": name}, headers=token_header)
        response = case.call_and_validate()
        assert response.status_code == 200
        headers = {k.lower(): v for k, v in response.headers.items()}
        content_type = headers["content-type"]
        assert (content_type[0] if isinstance(content_type, list) else content_type).startswith(
            media
        )


def test_an_entry_its_batch_and_its_datasets_answer_as_the_schema_says(
    api_schema, alice, token_header, settings
):
    settings.PKB_MAX_ACTIVE_SUBMISSIONS = 3  # a batch of three takes three slots
    entry = entry_register(user=alice, name="Fuzzed", kind="model", model_name="m",
                           samples_per_problem=3, k=2)  # fmt: skip
    batch = three_samples(alice, entry)
    calls = [
        ("/api/entries/", {}, {"kind": "model"}),
        ("/api/entries/{slug}/", {"slug": entry.slug}, {"profile": "cpu"}),
        ("/api/entries/{slug}/batches/{id}/", {"slug": entry.slug, "id": batch.pk}, {}),
        ("/api/entries/{slug}/dataset/{fmt}/", {"slug": entry.slug, "fmt": "csv"}, {}),
        ("/api/entries/{slug}/dataset/{fmt}/", {"slug": entry.slug, "fmt": "parquet"}, {}),
        ("/api/leaderboard/dataset/{fmt}/", {"fmt": "csv"}, {"who": "models"}),
    ]
    for path, parameters, query in calls:
        case = schema[path]["GET"].Case(
            path_parameters=parameters, query=query, headers=token_header
        )
        assert case.call_and_validate().status_code == 200, path
