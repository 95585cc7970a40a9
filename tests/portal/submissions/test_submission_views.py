from __future__ import annotations

from pathlib import Path

import pytest
from django.conf import settings
from django.urls import reverse

from portal.submissions.models import ProblemResult, Submission
from tests.portal.bundles import solving, upload, zip_bundle
from tests.portal.factories import ProblemResultFactory, SubmissionFactory

pytestmark = pytest.mark.django_db

SUBMIT_URL = reverse("submissions:submit")


def detail_url(pk: int) -> str:
    return reverse("submissions:detail", args=[pk])


def status_url(pk: int) -> str:
    return reverse("submissions:status", args=[pk])


@pytest.fixture
def submission(alice, team, problems):
    return SubmissionFactory(
        team=team, user=alice, problems=["all-reduce", "all-gather", "tp-linear"]
    )


# --- the upload form --------------------------------------------------------------------


def test_the_form_shows_the_teams_recent_submissions(client, bob, submission, charlie):
    other = SubmissionFactory(team=charlie.membership.team, user=charlie, bundle_name="c.zip")
    client.force_login(bob)
    response = client.get(SUBMIT_URL)
    assert response.status_code == 200
    assert list(response.context["submissions"]) == [submission]
    assert other.bundle_name not in response.content.decode()


def test_uploading_a_bundle_redirects_to_its_page(
    client, alice, problems, sent, django_capture_on_commit_callbacks
):
    client.force_login(alice)
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(SUBMIT_URL, {"bundle": upload(solving("all-reduce"))})
    submission = Submission.objects.get()
    assert response.status_code == 302
    assert response["Location"] == detail_url(submission.pk)
    assert len(sent) == 1


def test_a_bad_bundle_is_shown_in_the_form_and_nothing_is_kept(client, alice, problems, sent):
    client.force_login(alice)
    bad = upload(zip_bundle({"all-reduce.py": "def solution(:\n"}))
    response = client.post(SUBMIT_URL, {"bundle": bad})
    assert response.status_code == 400
    assert "all-reduce.py line 1" in response.content.decode()
    assert not Submission.objects.exists()
    media = Path(settings.MEDIA_ROOT)
    assert not media.exists() or not any(p.is_file() for p in media.rglob("*"))
    assert sent == []


def test_a_missing_file_is_a_form_error(client, alice, problems):
    client.force_login(alice)
    response = client.post(SUBMIT_URL, {})
    assert response.status_code == 400
    assert "This field is required" in response.content.decode()


def test_a_user_without_a_team_is_sent_to_the_team_page(client, dana):
    client.force_login(dana)
    response = client.get(SUBMIT_URL, follow=True)
    assert response.redirect_chain == [(reverse("accounts:team"), 302)]
    assert "Create or join a team first" in response.content.decode()


def test_the_form_requires_login(client):
    response = client.get(SUBMIT_URL)
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))


def test_the_form_rejects_wrong_method(client, alice):
    client.force_login(alice)
    assert client.put(SUBMIT_URL).status_code == 405


# --- the submission page ------------------------------------------------------------------


def test_a_queued_submission_polls_for_its_status(client, alice, submission):
    client.force_login(alice)
    page = client.get(detail_url(submission.pk)).content.decode()
    assert f'hx-get="{status_url(submission.pk)}"' in page
    assert 'hx-trigger="every 2s"' in page and 'hx-swap="outerHTML"' in page
    assert '<noscript><meta http-equiv="refresh" content="5"></noscript>' in page
    assert "vendor/htmx.min.js" in page
    assert "Queued" in page


def test_a_running_submission_shows_its_progress(client, alice, submission):
    Submission.objects.filter(pk=submission.pk).update(
        status="running", progress_done=1, progress_total=3, current_problem="all-gather"
    )
    client.force_login(alice)
    page = client.get(status_url(submission.pk)).content.decode()
    assert "1 / 3 problems judged, now: <strong>all-gather</strong>" in page
    assert "hx-get" in page


def test_the_page_renders_every_kind_of_result(client, bob, submission, problems):
    Submission.objects.filter(pk=submission.pk).update(status="done")
    ProblemResultFactory(
        submission=submission,
        problem=problems["all-reduce"],
        speedup=1.25,
        time_us=812.5,
        ref_time_us=1015.6,
    )
    ProblemResultFactory(
        submission=submission,
        problem=problems["all-gather"],
        status=ProblemResult.Status.WRONG_ANSWER,
        message="rank 1: 12 elements differ",
        max_abs_err=0.25,
        max_rel_err=0.0125,
        speedup=None,
        time_us=None,
    )
    ProblemResultFactory(
        submission=submission,
        problem=problems["tp-linear"],
        status=ProblemResult.Status.RUNTIME_ERROR,
        message="RuntimeError on rank 0",
        log="Traceback (most recent call last):\n  boom",
        speedup=None,
        time_us=None,
        max_abs_err=None,
        max_rel_err=None,
    )
    client.force_login(bob)
    page = client.get(detail_url(submission.pk)).content.decode()
    assert "Passed" in page and "1.25×" in page and "812.5 µs" in page and "1.02 ms" in page
    assert "Wrong answer" in page and "rank 1: 12 elements differ" in page
    assert "0.25 / 0.0125" in page
    assert "Runtime error" in page and "RuntimeError on rank 0" in page
    assert "<details><summary>Log of tp-linear</summary>" in page and "boom" in page
    assert "hx-get" not in page and "refresh" not in page


def test_a_timeout_and_a_failed_submission_say_why(client, alice, submission, problems):
    Submission.objects.filter(pk=submission.pk).update(
        status="failed", reason="evaluation stalled 3 times (last host gpu-2)"
    )
    ProblemResultFactory(
        submission=submission,
        problem=problems["all-reduce"],
        status=ProblemResult.Status.TIMEOUT,
        message="no answer after 60 s",
        speedup=None,
    )
    client.force_login(alice)
    page = client.get(detail_url(submission.pk)).content.decode()
    assert "Timeout" in page and "no answer after 60 s" in page
    assert "evaluation stalled 3 times (last host gpu-2)" in page
    assert "no result" in page  # the problems that got none


def test_the_partial_stops_polling_once_done(client, alice, submission):
    client.force_login(alice)
    assert "hx-get" in client.get(status_url(submission.pk)).content.decode()
    Submission.objects.filter(pk=submission.pk).update(status="done")
    partial = client.get(status_url(submission.pk)).content.decode()
    assert partial.startswith('<section id="submission-status"')
    assert "hx-get" not in partial and "hx-trigger" not in partial
    assert "<html" not in partial


def test_staff_may_see_any_submission(client, admin, submission):
    client.force_login(admin)
    assert client.get(detail_url(submission.pk)).status_code == 200


@pytest.mark.parametrize("url", [detail_url, status_url])
def test_the_pages_require_login(client, submission, url):
    response = client.get(url(submission.pk))
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))


@pytest.mark.parametrize("url", [detail_url, status_url])
def test_other_teams_get_a_404(client, charlie, dana, submission, url):
    for outsider in (charlie, dana):
        client.force_login(outsider)
        assert client.get(url(submission.pk)).status_code == 404


@pytest.mark.parametrize("url", [detail_url, status_url])
def test_the_pages_reject_wrong_method(client, alice, submission, url):
    client.force_login(alice)
    assert client.post(url(submission.pk)).status_code == 405


@pytest.mark.parametrize("url", [detail_url, status_url])
def test_a_bad_id_is_a_404(client, alice, submission, url):
    client.force_login(alice)
    assert client.get(url(submission.pk + 1000)).status_code == 404
    assert client.get(f"/submissions/{submission.pk}x/").status_code == 404


# --- the admin ------------------------------------------------------------------------------


def test_the_admin_requeues_and_cancels_through_the_services(
    client, admin, submission, sent, django_capture_on_commit_callbacks
):
    client.force_login(admin)
    url = reverse("admin:submissions_submission_changelist")
    assert client.get(url, {"status__exact": "queued"}).status_code == 200
    change = reverse("admin:submissions_submission_change", args=[submission.pk])
    assert client.get(change).status_code == 200
    with django_capture_on_commit_callbacks(execute=True):
        client.post(url, {"action": "requeue", "_selected_action": [submission.pk]})
    submission.refresh_from_db()
    assert submission.attempts == 2 and len(sent) == 1
    client.post(url, {"action": "cancel", "_selected_action": [submission.pk]})
    submission.refresh_from_db()
    assert submission.status == Submission.Status.CANCELLED
    assert submission.reason == "Cancelled by admin."


# --- roofline, flags and the environment ------------------------------------------------

GPU_ENVIRONMENT = {
    "hostname": "gpu-node-7",
    "backend": "nccl",
    "world_size": 4,
    "torch": "2.11.0+cu130",
    "python": "3.12.3",
    "cpu": "AMD EPYC 9554 64-Core Processor",
    "gpu": "NVIDIA H200",
    "gpu_count": 4,
    "cuda": "13.0",
    "nccl": "2.27.7",
    "driver": "580.95.05",
    "topology": ["GPU0-GPU1 NV18", "GPU0-GPU2 NV18"],
    "peer_bandwidth_gbps": {"one_peer": 388.1, "all_peers": 402.5, "used": 402.5},
}
CPU_ENVIRONMENT = {
    "hostname": "laptop",
    "backend": "gloo",
    "world_size": 2,
    "torch": "2.11.0+cpu",
    "python": "3.12.3",
    "cpu": "Intel(R) Core(TM) i7-1365U",
}


@pytest.fixture
def done(submission):
    Submission.objects.filter(pk=submission.pk).update(status="done")
    submission.refresh_from_db()
    return submission


def test_a_flagged_pass_is_shown_as_flagged_with_the_reason(client, alice, done, problems):
    ProblemResultFactory(
        submission=done,
        problem=problems["all-reduce"],
        speedup=40.0,
        roofline=2.5,
        flags=[ProblemResult.Flag.BELOW_FLOOR],
    )
    ProblemResultFactory(submission=done, problem=problems["all-gather"], speedup=1.2)
    client.force_login(alice)
    page = client.get(detail_url(done.pk)).content.decode()
    assert page.count('<span class="badge flagged"') == 1
    assert (
        "Flagged: faster than the links can move its bytes: kept as evidence, not ranked." in page
    )
    assert '<td class="num strong flagged">40.00×</td>' in page
    assert '<td class="num strong faster">1.20×</td>' in page


def test_a_tampered_pass_says_what_the_bundle_replaced(client, alice, done, problems):
    ProblemResultFactory(
        submission=done,
        problem=problems["all-reduce"],
        speedup=9.0,
        flags=[ProblemResult.Flag.TAMPERED],
    )
    client.force_login(alice)
    page = client.get(detail_url(done.pk)).content.decode()
    assert "Flagged: the bundle replaced the harness&#x27;s clocks" in page


def test_the_roofline_is_shown_per_problem_and_per_case(client, alice, done, problems):
    case = {
        "case": "eval-1",
        "dtype": "bfloat16",
        "passed": True,
        "time_us": 80.0,
        "time_spread_us": 2.0,
        "ref_time_us": 120.0,
        "floor_us": 49.6,
        "roofline": 0.62,
    }
    old_case = {"case": "eval-0", "dtype": "float32", "passed": True, "time_us": 10.0}
    ProblemResultFactory(
        submission=done, problem=problems["all-reduce"], roofline=0.62, cases=[case, old_case]
    )
    ProblemResultFactory(submission=done, problem=problems["all-gather"], roofline=None)
    client.force_login(alice)
    page = client.get(detail_url(done.pk)).content.decode()
    assert ">Roofline</th>" in page
    assert '<td class="num">62% of link limit</td>' in page
    assert "<summary>Cases of all-reduce (2)</summary>" in page
    assert "<td>eval-1</td>" in page and "49.6 µs" in page and "(IQR 2.0 µs)" in page
    assert "±" not in page
    assert page.count("62% of link limit") == 2
    assert "Cases of all-gather" not in page  # no cases, no details


def test_the_environment_lists_a_gpu_hosts_fingerprint(client, alice, done):
    Submission.objects.filter(pk=done.pk).update(environment=GPU_ENVIRONMENT)
    client.force_login(alice)
    page = client.get(detail_url(done.pk)).content.decode()
    assert "<h2>Environment</h2>" in page
    for label, value in [
        ("GPUs", "NVIDIA H200 × 4"),
        ("Process group", "nccl, 4 ranks"),
        ("Driver", "580.95.05"),
        ("CUDA", "13.0"),
        ("PyTorch", "2.11.0+cu130"),
        ("NCCL", "2.27.7"),
        ("Topology", "GPU0-GPU1 NV18\nGPU0-GPU2 NV18"),
        (
            "Measured peer bandwidth",
            "402.5 GB/s, used for the roofline\none peer: 388.1 GB/s\nall peers: 402.5 GB/s",
        ),
        ("Host", "gpu-node-7"),
    ]:
        assert f"<dt>{label}</dt><dd>{value}</dd>" in page


def test_the_environment_reads_well_for_a_cpu_host(client, alice, done):
    Submission.objects.filter(pk=done.pk).update(environment=CPU_ENVIRONMENT)
    client.force_login(alice)
    page = client.get(status_url(done.pk)).content.decode()
    assert "<dt>CPU</dt><dd>Intel(R) Core(TM) i7-1365U</dd>" in page
    assert "<dt>Process group</dt><dd>gloo, 2 ranks</dd>" in page
    assert "<dt>PyTorch</dt><dd>2.11.0+cpu</dd>" in page
    assert "GPUs" not in page and "Measured peer bandwidth" not in page


def test_no_environment_no_section(client, alice, submission):
    client.force_login(alice)
    assert "Environment" not in client.get(detail_url(submission.pk)).content.decode()


# --- numbers: one convention for times; the IQR as an interval ---------------------------


def test_a_cases_time_shows_the_middle_half_of_its_rounds_as_an_interval(
    client, alice, done, problems
):
    rounds = [{"candidate_us": us} for us in (900.0, 980.0, 1000.0, 1020.0, 1500.0)]
    case = {"case": "eval-1", "dtype": "float32", "passed": True, "time_us": 1000.0,
            "time_spread_us": 40.0, "rounds": rounds}  # fmt: skip
    ProblemResultFactory(submission=done, problem=problems["all-reduce"], cases=[case])
    client.force_login(alice)
    page = client.get(detail_url(done.pk)).content.decode()
    # Quartiles of the rounds as the judge takes them (inclusive): 980 and 1020 µs.
    assert '1.00 ms <span class="muted time-iqr">(0.98–1.02 ms)</span>' in page
    assert "±" not in page


# --- a finished submission that passed nothing ------------------------------------------


def test_a_done_submission_with_no_problem_passed_is_not_a_green_done(
    client, alice, done, problems
):
    ProblemResultFactory(submission=done, problem=problems["all-reduce"], status="wrong_answer")
    client.force_login(alice)
    for url in (detail_url(done.pk), SUBMIT_URL):
        page = client.get(url).content.decode()
        assert "Done: none passed" in page, url
        assert 'class="badge big done"' not in page and 'class="badge done"' not in page


def test_a_done_submission_with_a_pass_is_done(client, alice, done, problems):
    ProblemResultFactory(submission=done, problem=problems["all-reduce"], status="passed")
    client.force_login(alice)
    for url, badge in ((detail_url(done.pk), "badge big done"), (SUBMIT_URL, "badge done")):
        page = client.get(url).content.decode()
        assert f'class="{badge}">Done</span>' in page and "none passed" not in page


def test_each_case_says_how_many_pairs_it_took_and_whether_it_settled(
    client, alice, done, problems
):
    settled = {"case": "eval-0", "dtype": "bfloat16", "passed": True, "pairs": 12}
    capped = {"case": "eval-1", "dtype": "bfloat16", "passed": True, "pairs": 40}
    ProblemResultFactory(
        submission=done,
        problem=problems["all-reduce"],
        cases=[{**settled, "settled": True}, {**capped, "settled": False}],
    )
    client.force_login(alice)
    page = client.get(detail_url(done.pk)).content.decode()
    assert '<span class="muted small pairs-note">12 pairs</span>' in page
    assert "40 pairs, interval still wider than the host's target at the cap</span>" in page
