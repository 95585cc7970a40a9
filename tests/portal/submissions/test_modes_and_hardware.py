"""A run's mode, hardware and case to profile: chosen on the Submit page (and the API, and
pkb), checked, stored and sent to the host (issue 26)."""

from __future__ import annotations

import pytest
from django.urls import reverse

from evaluator.host import liveness
from evaluator.host.profiles import PROFILES
from portal.submissions.models import Submission
from portal.submissions.services import SubmissionError, submission_create, submission_requeue
from tests.portal.bundles import solving, upload
from tests.portal.factories import MembershipFactory, SubmissionFactory

pytestmark = pytest.mark.django_db

DEV_CASES = [
    {"name": "dev-fp32", "dtype": "float32", "params": {"n": 64}},
    {"name": "dev-bf16", "dtype": "bfloat16", "params": {"n": 64}},
]


@pytest.fixture
def cases(problems):
    for slug in ("all-reduce", "all-gather"):
        problem = problems[slug]
        problem.public_cases = DEV_CASES
        problem.demo_cases = [{"name": "demo-1m", "dtype": "float32", "params": {"n": 2**20}}]
        problem.save()
    return problems


@pytest.fixture
def cpu_worker(liveness_keys):
    liveness.announce_worker(liveness_keys, profile="cpu", name="pkb-cpu@host-a")
    return liveness_keys


def create(user, *slugs, **run):
    return submission_create(user=user, upload=upload(solving(*slugs or ["all-reduce"])), **run)


@pytest.mark.parametrize("mode", Submission.Mode.values)
def test_each_mode_is_stored_and_sent_to_the_host(
    mode, alice, problems, sent, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        submission = create(alice, mode=mode)
    assert submission.mode == mode
    [(request, queue)] = sent
    assert (request.mode, request.profile_case) == (mode, "")
    # Only ranked runs wait out a host whose canary reads out of bounds: the others go to
    # the queue such a host still takes (evaluator/host/canary.py).
    assert queue == ("eval.cpu" if mode == Submission.Mode.RANKED else "eval.cpu.unranked")


def test_a_run_goes_to_the_hardware_asked_for(
    alice, problems, sent, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        submission = create(alice, profile="h200x4")
    [(request, queue)] = sent
    assert submission.profile == request.profile == "h200x4"
    assert queue == PROFILES["h200x4"].queue == "gpu.h200x4"


def test_an_unknown_profile_is_refused_with_the_known_ones(alice, problems, sent):
    with pytest.raises(SubmissionError, match=r"Unknown hardware profile 'tpu'; known: cpu, ") as e:
        create(alice, profile="tpu")
    assert e.value.field == "profile"
    assert not Submission.objects.exists() and sent == []


def test_a_profile_run_may_name_a_public_case_of_its_problems(
    alice, cases, sent, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        submission = create(
            alice, "all-reduce", "all-gather", mode="profile", profile_case="dev-bf16"
        )
    assert submission.profile_case == "dev-bf16"
    [(request, _)] = sent
    assert (request.mode, request.profile_case) == ("profile", "dev-bf16")


def test_an_eval_case_is_never_profiled_nor_named(alice, cases, sent):
    with pytest.raises(SubmissionError) as refused:
        create(alice, mode="profile", profile_case="demo-1m")
    message = str(refused.value)
    assert "'demo-1m' is not a public case of all-reduce" in message
    assert "its public cases: dev-fp32, dev-bf16" in message
    assert refused.value.field == "profile_case"
    assert not Submission.objects.exists() and sent == []


def test_a_case_to_profile_is_for_profile_runs_only(alice, cases):
    with pytest.raises(SubmissionError, match="for profile runs only"):
        create(alice, mode="benchmark", profile_case="dev-fp32")


def test_an_unknown_mode_is_refused(alice, problems):
    with pytest.raises(SubmissionError, match=r"Unknown mode 'rank'; one of: test, benchmark"):
        create(alice, mode="rank")


def test_an_example_is_a_ranked_run(admin, team, problems):
    MembershipFactory(user=admin, team=team)
    with pytest.raises(SubmissionError, match="An example is a ranked run"):
        create(admin, mode="test", example_label="Example: pytorch")


def test_a_requeued_run_keeps_its_mode_and_case(
    alice, team, cases, sent, django_capture_on_commit_callbacks
):
    submission = SubmissionFactory(
        team=team, user=alice, running=True, mode="profile", profile_case="dev-fp32"
    )
    with django_capture_on_commit_callbacks(execute=True):
        assert submission_requeue(submission=submission, reason="host lost")
    [(request, queue)] = sent
    assert (request.mode, request.profile_case, queue) == (
        "profile",
        "dev-fp32",
        "eval.cpu.unranked",
    )


# The Submit page.


def test_the_form_offers_each_mode_with_its_quota(client, alice, team, settings):
    settings.PKB_BENCHMARK_RUNS_PER_HOUR, settings.PKB_BENCHMARK_RUNS_PER_DAY = 2, 5
    SubmissionFactory(team=team, user=alice, done=True, mode="benchmark")
    client.force_login(alice)
    body = client.get(reverse("submissions:submit")).content.decode()
    for mode in Submission.Mode.values:
        assert f'name="mode" value="{mode}"' in body
    assert 'value="ranked" checked' in body
    assert "1 of 2 benchmark runs used in the last hour, 1 of 5 in the last 24 hours" in body


def test_the_form_says_which_profiles_have_a_worker(client, alice, cpu_worker):
    client.force_login(alice)
    body = client.get(reverse("submissions:submit")).content.decode()
    assert "CPU, 4 ranks over gloo: 1 worker connected" in body
    assert "4x H200 (NVLink): no worker connected: a run waits until one is" in body


def test_a_benchmark_run_from_the_form(client, alice, problems, cpu_worker, sent):
    client.force_login(alice)
    form = {"bundle": upload(solving("all-reduce")), "mode": "benchmark", "profile": "cpu"}
    response = client.post(reverse("submissions:submit"), form)
    submission = Submission.objects.get()
    assert response.status_code == 302 and submission.mode == "benchmark"
    page = client.get(reverse("submissions:detail", args=[submission.pk])).content.decode()
    assert "mode-benchmark" in page and 'id="mode-note"' in page
    assert "the full judging, shown to your team only; never ranked" in page
    assert "No cpu worker" not in page


def test_a_run_on_a_profile_without_a_worker_is_queued_and_said_to_wait(
    client, alice, problems, cpu_worker
):
    client.force_login(alice)
    form = {"bundle": upload(solving("all-reduce")), "profile": "h200x4"}
    response = client.post(reverse("submissions:submit"), form, follow=True)
    body = response.content.decode()
    assert Submission.objects.get().profile == "h200x4"
    assert "No h200x4 worker (4x H200 (NVLink)) is connected now: the run waits" in body


@pytest.mark.parametrize(
    "field,value,message",
    [
        ("profile", "tpu", "Unknown hardware profile &#x27;tpu&#x27;"),
        ("mode", "fast", "Unknown mode &#x27;fast&#x27;"),
        ("profile_case", "demo-1m", "is not a public case of all-reduce"),
    ],
)
def test_the_form_refuses_a_bad_choice_and_keeps_nothing(
    client, alice, cases, field, value, message
):
    client.force_login(alice)
    form = {"bundle": upload(solving("all-reduce")), "mode": "profile", field: value}
    response = client.post(reverse("submissions:submit"), form)
    assert response.status_code == 400 and message in response.content.decode()
    assert not Submission.objects.exists()


@pytest.mark.parametrize("mode", ["test", "benchmark", "profile"])
def test_another_teams_run_is_a_404_and_anonymous_must_log_in(client, alice, team, charlie, mode):
    submission = SubmissionFactory(team=team, user=alice, done=True, mode=mode)
    url = reverse("submissions:detail", args=[submission.pk])
    response = client.get(url)
    assert response.status_code == 302 and "/login/" in response["Location"]
    client.force_login(charlie)
    assert client.get(url).status_code == 404
    assert client.get(reverse("submissions:status", args=[submission.pk])).status_code == 404
    client.force_login(alice)
    assert client.get(url).status_code == 200
