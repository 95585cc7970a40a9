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
