"""An entry's declaration is bounded text (issue 51): a note of at most NOTE_MAX characters,
names without control or bidirectional characters, a date an evaluation can have; each
refusal a 400 (API) or a form error (page) that says why, and nothing kept."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from portal.entries.models import Entry
from portal.entries.services import NOTE_MAX

pytestmark = pytest.mark.django_db

GOOD = {"name": "Fair Model", "kind": "model", "model_name": "m", "samples_per_problem": 2,
        "k": 1}  # fmt: skip


@pytest.mark.parametrize(
    ("field", "value", "reason"),
    [
        ("note", "x" * (NOTE_MAX + 1), f"at most {NOTE_MAX}"),
        ("name", "Evil\r\nSet-Cookie: x", "control or bidirectional character (U+000D)"),
        ("name", "abc\u202edcba", "(U+202E)"),
        ("model_name", "m\x1b[31m", "(U+001B)"),
        ("harness", "loop\u2066x", "(U+2066)"),
        ("note", "fine\nlines\x07", "(U+0007)"),
        ("evaluated_on", "0001-01-01", "not a date of an evaluation"),
        ("evaluated_on", "9999-12-31", "not a date of an evaluation"),
    ],
)
def test_the_api_refuses_unbounded_or_unsafe_text_with_the_reason(
    alice_api, problems, field, value, reason
):
    response = alice_api.post("/api/entries/", {**GOOD, field: value}, format="json")
    assert response.status_code == 400
    assert reason in str(response.json())
    assert not Entry.objects.exists()


def test_the_dates_an_evaluation_can_have_end_at_2020_and_tomorrow(alice_api, problems):
    """The range's edges: tomorrow is allowed for a client a time zone ahead of the site."""
    today = timezone.localdate()
    edges = {"2019-12-31": 400, "2020-01-01": 201, str(today + timedelta(days=1)): 201,
             str(today + timedelta(days=2)): 400}  # fmt: skip
    for i, (day, status) in enumerate(edges.items()):
        body = {**GOOD, "name": f"Model {i}", "evaluated_on": day}
        assert alice_api.post("/api/entries/", body, format="json").status_code == status, day
    assert Entry.objects.count() == 2


def test_a_note_on_several_lines_within_the_bound_is_kept(alice_api, problems):
    note = "line one\n\tline two " + "x" * (NOTE_MAX - 30)
    response = alice_api.post("/api/entries/", {**GOOD, "note": note}, format="json")
    assert response.status_code == 201, response.json()
    assert Entry.objects.get().note == note.strip()


def test_the_form_refuses_a_bidirectional_name_with_the_reason(client, alice, problems):
    client.force_login(alice)
    response = client.post("/entries/new/", {**GOOD, "name": "abc\u202edcba"})
    assert response.status_code == 400
    assert "(U+202E)" in response.content.decode()
    assert not Entry.objects.exists()
