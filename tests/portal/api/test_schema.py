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


def test_the_schema_is_read_only(client):
    assert client.post(reverse("api:schema")).status_code == 405


def test_the_schema_is_valid_openapi_without_warnings(tmp_path):
    # drf-spectacular validates against the OpenAPI 3 JSON schema; a warning (an unnamed
    # enum, a view it cannot read) fails the command.
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(tmp_path / "s.yml"))
    assert "/api/submissions/{id}/cancel/" in (tmp_path / "s.yml").read_text()
