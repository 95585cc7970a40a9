from __future__ import annotations

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.urls import reverse

from portal.api import throttling
from portal.settings import envrate

pytestmark = pytest.mark.django_db


@pytest.fixture
def two_per_minute(monkeypatch):
    monkeypatch.setattr(throttling.UserRateThrottle, "rate", "2/min", raising=False)
    monkeypatch.setattr(throttling.AnonRateThrottle, "rate", "2/min", raising=False)


def test_a_user_past_the_rate_gets_a_429_with_retry_after(two_per_minute, alice_api, problems):
    url = reverse("api:problems")
    assert [alice_api.get(url).status_code for _ in range(2)] == [200, 200]
    response = alice_api.get(url)
    assert response.status_code == 429
    assert 1 <= int(response["Retry-After"]) <= 60
    assert "Expected available in" in response.json()["detail"]


def test_each_user_has_a_budget_of_their_own(two_per_minute, alice_api, charlie_api, problems):
    url = reverse("api:problems")
    for _ in range(3):
        alice_api.get(url)
    assert charlie_api.get(url).status_code == 200


def test_anonymous_clients_are_throttled_by_address(two_per_minute, api, problems):
    url = reverse("api:problems")
    statuses = [api.get(url, REMOTE_ADDR="10.0.0.1").status_code for _ in range(3)]
    assert statuses == [200, 200, 429]
    assert api.get(url, REMOTE_ADDR="10.0.0.2").status_code == 200


def test_a_forged_forwarded_for_does_not_reset_the_budget(two_per_minute, api, problems):
    # No proxy is trusted by default: X-Forwarded-For is the client's to invent.
    url = reverse("api:problems")
    statuses = [
        api.get(url, REMOTE_ADDR="10.0.0.1", HTTP_X_FORWARDED_FOR=f"1.2.3.{i}").status_code
        for i in range(3)
    ]
    assert statuses == [200, 200, 429]


class BrokenStore:
    def get(self, *args, **kwargs):
        raise ConnectionError("redis is down")

    set = get


def test_requests_pass_when_the_counter_store_is_down(
    two_per_minute, monkeypatch, alice_api, problems
):
    monkeypatch.setattr(throttling.UserRateThrottle, "cache", BrokenStore())
    url = reverse("api:problems")
    assert [alice_api.get(url).status_code for _ in range(3)] == [200, 200, 200]


@pytest.mark.parametrize("value", ["120/min", "5/s", "1000/day", "10/hour"])
def test_rates_are_read_from_the_environment(monkeypatch, value):
    monkeypatch.setenv("PKB_API_RATE", value)
    assert envrate("PKB_API_RATE", "1/min") == value


@pytest.mark.parametrize("value", ["fast", "10", "10/fortnight", "-1/min", "1.5/s"])
def test_a_bad_rate_stops_the_settings(monkeypatch, value):
    monkeypatch.setenv("PKB_API_RATE", value)
    with pytest.raises(ImproperlyConfigured, match="PKB_API_RATE"):
        envrate("PKB_API_RATE", "1/min")
