from __future__ import annotations

import pytest
from django.core.management import call_command
from django.urls import reverse

pytestmark = pytest.mark.django_db


def test_the_site_serves_its_openapi_schema(client):
    response = client.get(reverse("api:schema"), {"format": "json"})
    assert response.status_code == 200
    schema = response.json()
    assert schema["openapi"].startswith("3.")
    assert {
        "/api/problems/",
        "/api/leaderboard/",
        "/api/leaderboard/problems/{slug}/",
        "/api/submissions/",
        "/api/submissions/{id}/",
        "/api/submissions/{id}/cancel/",
        "/api/teams/",
        "/api/team/",
        "/api/me/",
    } <= set(schema["paths"])
    upload = schema["paths"]["/api/submissions/"]["post"]["requestBody"]["content"]
    assert upload["multipart/form-data"]["schema"]["$ref"].endswith("SubmissionCreateRequest")
    assert "tokenAuth" in str(schema["components"]["securitySchemes"])


def test_the_docs_page_uses_the_sites_own_swagger_files(client):
    response = client.get(reverse("api:docs"))
    assert response.status_code == 200
    page = response.content.decode()
    assert "/static/drf_spectacular_sidecar/swagger-ui-dist/" in page
    assert reverse("api:schema") in page
    # A way back to the site above the docs (issue 40).
    assert 'id="back-to-site"' in page and f'href="{reverse("leaderboard:home")}"' in page


def test_the_schema_is_read_only(client):
    assert client.post(reverse("api:schema")).status_code == 405


def test_the_schema_is_valid_openapi_without_warnings(tmp_path):
    # drf-spectacular validates against the OpenAPI 3 JSON schema; a warning (an unnamed
    # enum, a view it cannot read) fails the command.
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(tmp_path / "s.yml"))
    assert "/api/submissions/{id}/cancel/" in (tmp_path / "s.yml").read_text()


def _operations(schema):
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            yield path, method, operation


def test_every_operation_documents_its_401_and_429_and_lookups_their_404(client):
    schema = client.get(reverse("api:schema"), {"format": "json"}).json()
    for path, method, operation in _operations(schema):
        responses = operation["responses"]
        assert {"401", "429"} <= set(responses), (method, path)
        if "{" in path:
            assert "404" in responses, (method, path)
        detail = responses["401"]["content"]["application/json"]["schema"]["$ref"]
        assert detail == "#/components/schemas/ErrorDetail"
    assert schema["components"]["schemas"]["ErrorDetail"]["required"] == ["detail"]


def test_bad_query_parameters_are_documented_as_a_400(client):
    schema = client.get(reverse("api:schema"), {"format": "json"}).json()
    teams = schema["paths"]["/api/teams/"]["get"]
    assert "400" in teams["responses"]
    limits = {p["name"]: p["schema"]["minimum"] for p in teams["parameters"]}
    assert limits == {"limit": 1, "offset": 0}
    assert "400" in schema["paths"]["/api/leaderboard/"]["get"]["responses"]


def test_an_unknown_api_address_is_a_json_404(client):
    for url in ("/api/nope/", "/api/teams/not a slug/", "/api/submissions/x/cancel/"):
        response = client.post(url) if url.endswith("cancel/") else client.get(url)
        assert response.status_code == 404
        assert response.json() == {"detail": "No such API address."}
    assert client.get("/api/teams").status_code == 301  # APPEND_SLASH still redirects


def test_every_operation_documents_the_414_of_an_over_long_request_line(client):
    schema = client.get(reverse("api:schema"), {"format": "json"}).json()
    for path, method, operation in _operations(schema):
        response = operation["responses"]["414"]
        assert "4,094 bytes" in response["description"], (method, path)
        assert "text/html" in response["content"], "the web server's page, not JSON"
