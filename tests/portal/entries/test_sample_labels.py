"""An entry's samples are labelled with their entry (name, link) wherever the team's
submissions are listed and on their own pages, not shown as ordinary ranked runs
(issue 40, item 4)."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from portal.submissions.services import submission_create
from tests.portal.bundles import solving, upload
from tests.portal.entries.helpers import send

pytestmark = pytest.mark.django_db


def row(html: str, submission_id: int) -> str:
    found = re.search(rf'<tr data-submission="{submission_id}">(.*?)</tr>', html, re.S)
    assert found, f"no row for submission {submission_id}"
    return found.group(1)


@pytest.fixture
def sample_and_run(client, alice, entry):
    """Sample 1 of alice's entry, and an ordinary ranked run of her team's."""
    sample = send(alice, entry, solving("all-reduce")).samples.get()
    ordinary = submission_create(user=alice, upload=upload(solving("all-reduce"), "own.zip"))
    return sample, ordinary


def test_the_teams_page_labels_a_sample_with_its_entry(client, entry, sample_and_run):
    sample, ordinary = sample_and_run
    html = client.get(reverse("leaderboard:team", args=[entry.team.slug])).content.decode()
    labelled = row(html, sample.submission.pk)
    assert "Claude Kernels" in labelled and "mode-ranked" not in labelled
    assert f'href="{reverse("entries:detail", args=[entry.slug])}"' in labelled
    assert f'href="{sample.get_absolute_url()}"' in labelled
    plain = row(html, ordinary.pk)
    assert "mode-ranked" in plain and "Claude Kernels" not in plain


def test_the_submit_pages_list_labels_a_sample_with_its_entry(client, alice, entry, sample_and_run):
    sample, ordinary = sample_and_run
    client.force_login(alice)
    html = client.get(reverse("submissions:submit")).content.decode()
    labelled = row(html, sample.submission.pk)
    assert "Claude Kernels" in labelled and "mode-ranked" not in labelled
    assert f'href="{reverse("entries:detail", args=[entry.slug])}"' in labelled
    assert "Claude Kernels" not in row(html, ordinary.pk)


def test_a_samples_page_says_whose_sample_it_is(client, alice, entry, sample_and_run):
    sample, ordinary = sample_and_run
    client.force_login(alice)
    url = reverse("submissions:detail", args=[sample.submission.pk])
    html = client.get(url).content.decode()
    assert 'id="entry-note"' in html and "Sample 1 of the entry" in html
    assert f'href="{reverse("entries:detail", args=[entry.slug])}"' in html
    html = client.get(reverse("submissions:detail", args=[ordinary.pk])).content.decode()
    assert 'id="entry-note"' not in html and "mode-ranked" in html
