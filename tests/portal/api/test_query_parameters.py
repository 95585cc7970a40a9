"""Query parameters are checked, not guessed: an empty enum value or an offset that is no
number is a 400 naming the parameter, never a silent default."""

from __future__ import annotations

import pytest
from django.urls import reverse

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    ("name", "params"),
    [
        ("api:leaderboard", {"category": ""}),
        ("api:leaderboard", {"profile": ""}),
        ("api:leaderboard", {"category": "Tensor"}),
        ("api:teams", {"offset": "null"}),
        ("api:teams", {"offset": "-1"}),
        ("api:teams", {"limit": "0"}),
        ("api:teams", {"limit": "ten"}),
        ("api:teams", {"offset": "１"}),  # a full-width digit: isdigit() but not ASCII
    ],
)
def test_a_bad_query_parameter_is_a_400_naming_it(api, problems, name, params):
    response = api.get(reverse(name), params)
    assert response.status_code == 400
    [(parameter, [message])] = response.json().items()
    assert parameter in params and repr(params[parameter]) in message


def test_a_bad_profile_of_a_problem_board_is_a_400(api, problems):
    url = reverse("api:problem-leaderboard", args=["all-reduce"])
    assert api.get(url, {"profile": ""}).status_code == 400
    assert api.get(url, {"profile": "cpu"}).status_code == 200


def test_a_bad_offset_of_your_submissions_is_a_400(alice_api):
    response = alice_api.get(reverse("api:submissions"), {"offset": "null"})
    assert response.status_code == 400
    assert response.json() == {"offset": ["'null' is not a whole number of at least 0."]}


def test_good_values_still_work(api, problems):
    assert api.get(reverse("api:leaderboard"), {"category": "tensor"}).status_code == 200
    data = api.get(reverse("api:teams"), {"offset": "0", "limit": "1"}).json()
    assert data["results"] == [] and data["count"] == 0


@pytest.mark.parametrize(
    "query", ["limit=1&limit=2", "offset=0&offset=5", "limit=1&offset=0&offset=0"]
)
def test_limit_or_offset_given_twice_on_your_submissions_is_a_400(alice_api, query):
    response = alice_api.get(f"{reverse('api:submissions')}?{query}")
    assert response.status_code == 400
    [(parameter, [message])] = response.json().items()
    assert parameter in query and "given 2 times" in message and "give it once" in message


def test_a_repeated_choice_is_a_400_even_when_both_values_are_good(api, problems):
    response = api.get(f"{reverse('api:leaderboard')}?category=tensor&category=collective")
    assert response.status_code == 400
    assert "category" in response.json()


def test_the_schema_says_limit_and_offset_are_given_once(client):
    schema = client.get(reverse("api:schema"), {"format": "json"}).json()
    parameters = schema["paths"]["/api/submissions/"]["get"]["parameters"]
    paging = {p["name"]: p for p in parameters if p["name"] in ("limit", "offset")}
    assert set(paging) == {"limit", "offset"}
    for parameter in paging.values():
        assert "more than once" in parameter["description"]
        assert parameter["schema"]["type"] == "integer", "one value, not an array"


@pytest.mark.parametrize("method", ["trace", "put", "delete"])
def test_a_method_the_endpoint_does_not_take_is_a_405_whatever_its_query(alice_api, method):
    """Unknown query parameters are a 400 only where the method is one the view takes:
    TRACE with ?kind= on the entries list read 400 where the schema says 405 (the schema
    fuzz found it)."""
    response = getattr(alice_api, method)(reverse("api:entries") + "?kind=agent&profile=cpu")
    assert response.status_code == 405
