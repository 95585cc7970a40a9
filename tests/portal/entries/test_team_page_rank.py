"""A team's page ranks the team itself, never one of its model entries (issue 40)."""

from __future__ import annotations

import pytest
from django.urls import reverse

from portal.accounts.services import team_disqualify
from portal.leaderboard.selectors import leaderboard_rows
from tests.portal.entries.helpers import three_samples

pytestmark = pytest.mark.django_db


def standing(client, team):
    response = client.get(reverse("leaderboard:team", args=[team.slug]), {"profile": "cpu"})
    assert response.status_code == 200
    return response.context["standing"], response.content.decode()


def test_an_entrys_rank_is_not_its_teams(client, alice, entry):
    three_samples(alice, entry)
    ranked = [(r.team_slug, r.entry_slug, r.rank) for r in leaderboard_rows(profile="cpu")]
    assert (entry.team.slug, entry.slug, 1) in ranked  # the entry ranks on the board
    found, html = standing(client, entry.team)
    assert found.rank is None and found.score.solved == 0
    assert 'id="team-rank"' not in html and "Not ranked" in html


def test_a_disqualified_teams_page_says_not_ranked(client, alice, entry):
    three_samples(alice, entry)
    team_disqualify(team=entry.team, reason="Replayed cached outputs.")
    found, html = standing(client, entry.team)
    assert found.rank is None
    assert "Rank " not in html and 'id="team-disqualified"' in html
