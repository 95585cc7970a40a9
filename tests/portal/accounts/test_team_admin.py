from __future__ import annotations

import pytest
from django.urls import reverse

pytestmark = pytest.mark.django_db


def test_the_admin_lists_teams_with_their_members(client, admin, alice, bob, team):
    client.force_login(admin)
    page = client.get(reverse("admin:accounts_team_changelist")).content.decode()
    assert "Alice&#x27;s Kernels" in page
    change = client.get(reverse("admin:accounts_team_change", args=[team.pk]))
    assert change.status_code == 200
    assert "alice" in change.content.decode() and "bob" in change.content.decode()


def test_the_admin_is_for_staff_only(client, alice):
    client.force_login(alice)
    response = client.get(reverse("admin:accounts_team_changelist"))
    assert response.status_code == 302
    assert "/admin/login/" in response["Location"]
