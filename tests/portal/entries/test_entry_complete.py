"""An entry's scores are complete only once each problem it tried has its declared n
judged samples (issue 40: n=3 with 2 sent said complete)."""

from __future__ import annotations

import pytest

from portal.entries.selectors import entry_status
from tests.portal.bundles import solving
from tests.portal.entries.helpers import judge, send, three_samples
from tests.portal.judging import passed

pytestmark = pytest.mark.django_db


def test_two_of_three_declared_samples_judged_is_not_complete(client, alice, entry):
    batch = send(alice, entry, solving("all-reduce"), solving("all-reduce"))
    for sample in batch.samples.all():
        judge(sample, passed("all-reduce"))
    scores = entry_status(entry, profile="cpu").scores
    assert (scores.sent, scores.judged) == (2, 2)
    assert not scores.complete
    response = client.get(f"/api/entries/{entry.slug}/")
    assert response.status_code == 200 and response.json()["scores"]["complete"] is False


def test_the_declared_three_judged_are_complete(alice, entry):
    three_samples(alice, entry)
    assert entry_status(entry, profile="cpu").scores.complete
