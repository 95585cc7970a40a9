"""An entry's page says what each running sample does, as a submission's page does:
starting until its host reports, compiling, then how many problems it judged; never
"0 / 8" before anything compiled (issue 40, item 9)."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from portal.submissions.services import evaluation_progress, evaluation_start
from tests.portal.bundles import solving
from tests.portal.entries.helpers import send

pytestmark = pytest.mark.django_db
COUNT = re.compile(r"\d+ / \d+")


@pytest.fixture
def started(alice, entry):
    """Sample 1 of two problems, its host started on it."""
    sample = send(alice, entry, solving("all-reduce", "all-gather")).samples.get()
    assert evaluation_start(evaluation_id=str(sample.submission.evaluation_id), host="cpu-1")
    return sample


def status_cell(client, entry) -> str:
    html = client.get(reverse("entries:detail", args=[entry.slug])).content.decode()
    found = re.search(r'<tr data-sample="1">.*?</td>\s*<td>.*?</td>\s*<td>(.*?)</td>', html, re.S)
    assert found, "no row for sample 1"
    return found.group(1)


def progress(sample, **fields) -> None:
    eid = str(sample.submission.evaluation_id)
    assert evaluation_progress(evaluation_id=eid, current="", **fields)


def test_a_started_sample_says_starting(client, entry, started):
    cell = status_cell(client, entry)
    assert "starting" in cell and not COUNT.search(cell)


def test_a_compiling_sample_says_compiling(client, entry, started):
    progress(started, done=0, total=2, phase="compiling")
    cell = status_cell(client, entry)
    assert "compiling" in cell and not COUNT.search(cell)


def test_a_judging_sample_counts_its_problems(client, entry, started):
    progress(started, done=1, total=2, phase="judging")
    assert "1 / 2 judged" in status_cell(client, entry)
