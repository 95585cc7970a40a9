"""The portal's people and problems.

alice submits for "Alice's Kernels", bob is her teammate, charlie is an outsider with a
team of his own, dana has no team, and admin is staff.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis

from evaluator.contract import EvaluationRequest
from portal.accounts.models import Membership
from portal.problems.models import Category, Problem
from portal.submissions import broker
from tests.portal.factories import MembershipFactory, ProblemFactory, TeamFactory, UserFactory

PASSWORD = "correct-horse-battery"


@pytest.fixture(autouse=True)
def _fast_and_isolated(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"
    # The default hasher is slow on purpose; tests log in a lot.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture(autouse=True)
def sent(monkeypatch) -> list[tuple[EvaluationRequest, str]]:
    """What would go to the evaluator hosts: the broker is the boundary we do not own here."""
    calls: list[tuple[EvaluationRequest, str]] = []

    def record(request: EvaluationRequest, *, queue: str) -> None:
        calls.append((request, queue))

    monkeypatch.setattr(broker, "send_evaluation", record)
    return calls


def _forget_liveness(client: redis.Redis) -> None:
    keys = list(client.scan_iter("pkb:*"))
    if keys:
        client.delete(*keys)


@pytest.fixture
def liveness_keys() -> Iterator[redis.Redis]:
    """The liveness keys in the suite's own Redis database (a real Redis: the boundary the
    sweeper, the pages and the hosts share), without those of an earlier test."""
    client = broker.client()
    _forget_liveness(client)
    yield client
    _forget_liveness(client)


@pytest.fixture
def team(db):
    return TeamFactory(name="Alice's Kernels", slug="alices-kernels")


@pytest.fixture
def alice(team):
    user = UserFactory(username="alice")
    MembershipFactory(user=user, team=team, role=Membership.Role.OWNER)
    return user


@pytest.fixture
def bob(team, alice):
    user = UserFactory(username="bob")
    MembershipFactory(user=user, team=team)
    return user


@pytest.fixture
def charlie_team(db):
    return TeamFactory(name="Charlie Ltd", slug="charlie-ltd")


@pytest.fixture
def charlie(charlie_team):
    user = UserFactory(username="charlie")
    MembershipFactory(user=user, team=charlie_team, role=Membership.Role.OWNER)
    return user


@pytest.fixture
def dana(db):
    return UserFactory(username="dana")


@pytest.fixture
def admin(db):
    return UserFactory(username="admin", is_staff=True, is_superuser=True)


@pytest.fixture
def problems(db) -> dict[str, Problem]:
    """Three published problems in two categories, one hidden and one retired."""
    rows = [
        ProblemFactory(slug="all-reduce", title="All-reduce (sum)"),
        ProblemFactory(slug="all-gather", title="All-gather"),
        ProblemFactory(slug="tp-linear", title="Tensor-parallel linear", category=Category.TENSOR),
        ProblemFactory(slug="secret-op", title="Secret op", status=Problem.Status.HIDDEN),
        ProblemFactory(slug="old-op", title="Old op", status=Problem.Status.RETIRED),
    ]
    return {p.slug: p for p in rows}
