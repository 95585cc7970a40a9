"""The board's rank ranges in the API (issue 23), and the rule in its schema."""

from __future__ import annotations

import pytest
from django.urls import reverse

from portal.leaderboard.scoring import RULE
from portal.leaderboard.selectors import BASELINE_NAME
from tests.portal.leaderboard.test_rank_ranges import close_race  # noqa: F401  (fixture)

pytestmark = pytest.mark.django_db


def test_the_api_carries_the_range_and_says_the_rule(client, close_race):  # noqa: F811
    data = client.get(reverse("api:leaderboard")).json()
    found = {
        r["team"]: (r["rank"], r["rank_low"], r["rank_high"], r["rank_range"]) for r in data["rows"]
    }
    assert found["Clear"] == (1, 1, 1, None) and found["Near"] == (2, 2, 3, "2-3")
    assert found[BASELINE_NAME] == (None, None, None, None)
    schema = client.get(reverse("api:schema"), {"format": "json"}).json()
    components = schema["components"]["schemas"]
    assert components["Board"]["properties"]["rows"]["description"] == RULE
    assert {"rank_low", "rank_high", "rank_range"} <= set(components["Row"]["properties"])
