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


CHANGELIST = reverse("admin:accounts_team_changelist")


def test_the_admin_disqualifies_a_team_with_a_reason_and_logs_it(client, admin, alice, team):
    from django.contrib.admin.models import LogEntry

    client.force_login(admin)
    form = client.post(CHANGELIST, {"action": "disqualify", "_selected_action": [team.pk]})
    assert "a reason the team will read" in form.content.decode()
    response = client.post(
        CHANGELIST,
        {
            "action": "disqualify",
            "_selected_action": [team.pk],
            "apply": "1",
            "reason": "Two accounts, one team.",
        },
    )
    assert response.status_code == 302
    team.refresh_from_db()
    assert team.is_disqualified and team.disqualification_reason == "Two accounts, one team."
    assert LogEntry.objects.get(object_id=str(team.pk)).change_message == (
        "Disqualify teams: Two accounts, one team."
    )
    listed = client.get(CHANGELIST, {"disqualified_at__isempty": "0"}).context["cl"].result_list
    assert list(listed) == [team]

    client.post(CHANGELIST, {"action": "reinstate", "_selected_action": [team.pk]})
    team.refresh_from_db()
    assert not team.is_disqualified
    assert LogEntry.objects.filter(object_id=str(team.pk)).count() == 2


def test_the_team_admin_cannot_edit_the_disqualification_by_hand(client, admin, team):
    client.force_login(admin)
    client.post(
        reverse("admin:accounts_team_change", args=[team.pk]),
        {
            "name": team.name,
            "slug": team.slug,
            "invite_code": team.invite_code,
            "disqualification_reason": "sneaky",
            "memberships-TOTAL_FORMS": "0",
            "memberships-INITIAL_FORMS": "0",
        },
    )
    team.refresh_from_db()
    assert team.disqualification_reason == ""
