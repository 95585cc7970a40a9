"""Modes, hardware and quotas through the API: what `pkb submit --mode/--profile/--case`,
`pkb profiles` and `pkb quota` read (issue 26)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from evaluator.host import liveness
from portal.submissions.models import Submission
from tests.portal.bundles import solving, upload
from tests.portal.factories import SubmissionFactory

pytestmark = pytest.mark.django_db


def post(client, **fields):
    return client.post(
        reverse("api:submissions"), {"bundle": upload(solving("all-reduce")), **fields}
    )


@pytest.mark.parametrize("mode", Submission.Mode.values)
def test_each_mode_is_created_and_labelled(
    mode, alice_api, problems, sent, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        response = post(alice_api, mode=mode)
    assert response.status_code == 201, response.json()
    data = response.json()
    assert data["mode"] == mode
    [(request, _)] = sent
    assert request.mode == mode
    assert alice_api.get(data["url"]).json()["mode"] == mode
    assert alice_api.get(reverse("api:submissions")).json()["results"][0]["mode"] == mode


def test_without_a_mode_a_run_is_ranked(alice_api, problems):
    assert post(alice_api).json()["mode"] == "ranked"


@pytest.mark.parametrize(
    "fields,key,message",
    [
        (
            {"mode": "rank"},
            "mode",
            "Unknown mode 'rank'; one of: test, benchmark, ranked, profile.",
        ),
        ({"profile": "tpu"}, "profile", "Unknown hardware profile 'tpu'; known: cpu, h200x2, "),
        ({"profile_case": "dev-fp32"}, "profile_case", "A case to profile is for profile runs"),
    ],
)
def test_a_bad_choice_is_a_400_naming_its_field(alice_api, problems, sent, fields, key, message):
    response = post(alice_api, **fields)
    assert response.status_code == 400
    [error] = response.json()[key]
    assert error.startswith(message)
    assert not Submission.objects.exists() and sent == []


def test_an_eval_case_to_profile_is_a_400(alice_api, problems):
    problem = problems["all-reduce"]
    problem.public_cases = [{"name": "dev-fp32", "dtype": "float32", "params": {}}]
    problem.save()
    response = post(alice_api, mode="profile", profile_case="demo-16m")
    assert response.status_code == 400
    assert response.json() == {
        "profile_case": [
            "'demo-16m' is not a public case of all-reduce; its public cases: dev-fp32. Only "
            "public (dev) cases can be profiled; leave it empty and the host picks one."
        ]
    }


def test_a_profile_without_a_worker_is_accepted_with_a_notice(alice_api, problems, liveness_keys):
    liveness.announce_worker(liveness_keys, profile="cpu", name="pkb-cpu@a")
    waits = post(alice_api, profile="h200x2").json()
    assert waits["profile"] == "h200x2"
    assert waits["notice"].startswith("No h200x2 worker (2x H200 (NVLink)) is connected now")
    assert post(alice_api, profile="cpu").json()["notice"] is None


def test_profiles_say_which_have_a_worker(alice_api, liveness_keys, api):
    for name in ("pkb-cpu@a", "pkb-cpu@b"):
        liveness.announce_worker(liveness_keys, profile="cpu", name=name)
    offers = {o["name"]: o for o in alice_api.get(reverse("api:profiles")).json()}
    assert offers["cpu"] == {
        "name": "cpu",
        "label": "CPU, 4 ranks over gloo",
        "workers": 2,
        "is_default": True,
        "note": "2 workers connected",
    }
    assert offers["h200x8"]["workers"] == 0
    assert api.get(reverse("api:profiles")).status_code == 401


def test_the_quota_per_mode(alice_api, alice, team, settings):
    settings.PKB_TEST_RUNS_PER_HOUR, settings.PKB_TEST_RUNS_PER_DAY = 1, 5
    SubmissionFactory(team=team, user=alice, done=True, mode="test")
    data = alice_api.get(reverse("api:quota")).json()
    modes = {m["mode"]: m for m in data["modes"]}
    assert list(modes) == ["test", "benchmark", "ranked", "profile"]
    test = modes["test"]
    assert [(w["window_s"], w["used"], w["limit"]) for w in test["windows"]] == [
        (3600, 1, 1),
        (86400, 1, 5),
    ]
    assert test["windows"][0]["next_at"] is not None and test["windows"][1]["next_at"] is None
    assert test["refusal"].startswith("Your team has used 1 of 1 test runs in the last hour;")
    assert modes["ranked"]["refusal"] is None
    assert (data["active"], data["active_limit"]) == (0, settings.PKB_MAX_ACTIVE_SUBMISSIONS)


def test_a_full_mode_is_a_429_saying_when_and_other_modes_go_on(
    alice_api, alice, team, problems, settings
):
    settings.PKB_PROFILE_RUNS_PER_HOUR = 1
    earlier = SubmissionFactory(team=team, user=alice, done=True, mode="profile")
    Submission.objects.filter(pk=earlier.pk).update(
        created_at=timezone.now() - timedelta(minutes=30)
    )
    response = post(alice_api, mode="profile")
    assert response.status_code == 429
    assert response.json()["detail"].startswith(
        "Your team has used 1 of 1 profile runs in the last hour; next at "
    )
    assert 29 * 60 <= int(response["Retry-After"]) <= 30 * 60
    assert post(alice_api, mode="test").status_code == 201


@pytest.mark.parametrize("mode", ["test", "benchmark", "profile"])
def test_another_teams_run_is_a_404(mode, alice, team, charlie_api, alice_api):
    submission = SubmissionFactory(team=team, user=alice, done=True, mode=mode)
    url = reverse("api:submission", args=[submission.pk])
    assert charlie_api.get(url).status_code == 404
    assert alice_api.get(url).json()["mode"] == mode
