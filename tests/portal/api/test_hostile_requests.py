"""Requests a hostile team sends that once were server errors (issue 51): each is a 400 or a
404 that says why, on the API and on the pages."""

from __future__ import annotations

import pytest
from django.test import Client

from evaluator.contract import Artifact as Made
from evaluator.contract import EvaluationOutcome, finished_message
from portal.submissions.services import evaluation_finish
from tests.portal.factories import SubmissionFactory
from tests.portal.judging import passed

pytestmark = pytest.mark.django_db

NESTED = "[" * 5000 + "]" * 5000


@pytest.fixture
def profiled(team, alice, problems):
    submission = SubmissionFactory(team=team, user=alice, running=True, mode="profile")
    table = Made.build(name="top.csv", media_type="text/csv", data=b"kernel,calls\nk,1\n")
    message = finished_message(
        evaluation_id=str(submission.evaluation_id),
        outcome=EvaluationOutcome.DONE,
        results=[passed("all-reduce", 1.2)],
        artifacts=[table],
    )
    assert evaluation_finish(message=message)
    return submission


@pytest.mark.parametrize("name", ["top.csv\x00", "\x00", "top%00.csv", "..", "a b"])
def test_an_artifact_name_no_host_could_send_is_a_404_on_the_api(alice_api, profiled, name):
    response = alice_api.get(f"/api/submissions/{profiled.pk}/artifacts/{name}/")
    assert response.status_code == 404
    assert "plain file names" in response.json()["detail"]


def test_an_artifact_name_with_a_nul_byte_is_a_404_on_the_page(alice, profiled):
    client = Client(raise_request_exception=False)
    client.force_login(alice)
    response = client.get(f"/submissions/{profiled.pk}/artifacts/top.csv\x00/")
    assert response.status_code == 404
    assert client.get(f"/submissions/{profiled.pk}/artifacts/top.csv/").status_code == 200


def test_a_deeply_nested_entry_declaration_is_a_400_with_the_reason(alice_api, problems):
    response = alice_api.post("/api/entries/", NESTED, content_type="application/json")
    assert response.status_code == 400
    assert "nested too deeply" in response.json()["detail"]


def test_a_deeply_nested_body_is_a_400_wherever_json_is_read(alice_api, profiled):
    # The cancel endpoint takes no body, but DRF parses one if it is sent.
    url = f"/api/submissions/{profiled.pk}/cancel/"
    response = alice_api.post(url, NESTED, content_type="application/json")
    assert response.status_code in (400, 409), response.content
    if response.status_code == 400:
        assert "nested too deeply" in response.json()["detail"]


def _operations(client) -> list[tuple[str, str, list[str]]]:
    schema = client.get("/api/schema/?format=json").json()
    return [
        (path, method, [p["name"] for p in op.get("parameters", []) if p["in"] == "query"])
        for path, ops in schema["paths"].items()
        for method, op in ops.items()
        if path not in ("/api/schema/",)
    ]


@pytest.mark.parametrize(
    "url", ["/api/submissions/?mode=test", "/api/entries/?mode=test", "/api/teams/?sort=name"]
)
def test_an_unknown_query_parameter_on_a_list_is_a_400_naming_it(alice_api, problems, url):
    response = alice_api.get(url)
    assert response.status_code == 400
    [(name, [message])] = response.json().items()
    assert name in url and "unknown query parameter" in message


def test_every_operation_refuses_what_its_schema_does_not_document(alice_api, profiled):
    """A made-up parameter is a 400 on every operation, and no documented one is refused as
    unknown: the views' lists and the schema agree."""
    for path, method, documented in _operations(alice_api):
        url = path.replace("{id}", str(profiled.pk)).replace("{slug}", "x")
        url = url.replace("{name}", "top.csv").replace("{fmt}", "csv")
        call = getattr(alice_api, method)
        response = call(f"{url}?made_up=1")
        assert response.status_code == 400, (method, path, response.status_code)
        assert "made_up" in response.json(), (method, path)
        for name in documented:
            body = call(f"{url}?{name}=").content.decode()
            assert "unknown query parameter" not in body, (method, path, name)
