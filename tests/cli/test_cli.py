from __future__ import annotations

import io
import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from evaluator.contract import CaseResult, EvaluationOutcome, ProblemStatus, finished_message
from evaluator.contract import ProblemResult as Reported
from portal.api import throttling
from portal.api.services import api_token_create
from portal.cli import main as cli
from portal.cli.commands import common
from portal.submissions.models import Submission
from portal.submissions.services import evaluation_finish, evaluation_progress, evaluation_start
from tests.portal.bundles import solving, zip_bundle
from tests.portal.factories import (
    ProblemFactory,
    ProblemResultFactory,
    SubmissionFactory,
    TeamFactory,
)

REPO = Path(__file__).resolve().parents[2]


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def config_file() -> Path:
    return Path(os.environ["PKB_CONFIG"])


# login


def test_login_checks_the_token_and_stores_it_for_you_only(capsys, live_server, alice_token):
    code, _, err = run(capsys, "--url", live_server.url, "login", "--token", alice_token)
    assert code == 0
    assert "as alice for team Alice's Kernels" in err
    assert json.loads(config_file().read_text()) == {"url": live_server.url, "token": alice_token}
    assert stat.S_IMODE(config_file().stat().st_mode) == 0o600
    assert stat.S_IMODE(config_file().parent.stat().st_mode) == 0o700


def test_login_reads_the_token_from_stdin(capsys, monkeypatch, live_server, alice_token):
    monkeypatch.setattr(sys, "stdin", io.StringIO(alice_token + "\n"))
    assert run(capsys, "login", "--url", live_server.url)[0] == 0
    assert json.loads(config_file().read_text())["token"] == alice_token


def test_login_with_a_bad_token_stores_nothing(capsys, site, alice):
    code, _, err = run(capsys, "login", "--token", "pkb_wrong")
    assert code == 3
    assert "Invalid token." in err and "pkb login" in err
    assert not config_file().exists()


def test_commands_use_the_stored_login(capsys, live_server, alice_token, alice, team):
    run(capsys, "--url", live_server.url, "login", "--token", alice_token)
    mine = SubmissionFactory(team=team, user=alice)
    code, out, _ = run(capsys, "status", str(mine.pk))
    assert code == 0 and f"Submission #{mine.pk}" in out


def test_the_environment_overrides_the_stored_login(
    capsys, monkeypatch, site, charlie, charlie_team
):
    config_file().parent.mkdir(parents=True)
    config_file().write_text(json.dumps({"url": "http://127.0.0.1:1", "token": "pkb_stale"}))
    monkeypatch.setenv("PKB_TOKEN", api_token_create(user=charlie, name="ci")[1])
    theirs = SubmissionFactory(team=charlie_team, user=charlie)
    code, out, _ = run(capsys, "status", str(theirs.pk))
    assert code == 0 and f"Submission #{theirs.pk}" in out


# problems and leaderboards


def test_problems_lists_the_open_ones(capsys, site, problems):
    code, out, _ = run(capsys, "problems")
    assert code == 0
    assert "all-reduce" in out and "Tensor-parallel linear" in out and "2, 4, 8" in out
    assert "secret-op" not in out


def test_problems_lists_every_page_of_them(capsys, site, problems):
    # The API answers 50 a page (issue 51); `pkb problems` reads them all.
    for n in range(60):
        ProblemFactory(slug=f"many-{n:03}")
    code, out, _ = run(capsys, "problems")
    assert code == 0
    listed = [line.split()[0] for line in out.splitlines() if line.strip().startswith("many-")]
    assert sorted(listed) == [f"many-{n:03}" for n in range(60)]
    assert "all-reduce" in out


def finished_result(team, problem, speedup, **kwargs):
    submission = SubmissionFactory(team=team, done=True, problems=[problem.slug], **kwargs)
    ProblemResultFactory(submission=submission, problem=problem, speedup=speedup)


def test_the_leaderboard_by_category_and_profile(capsys, site, problems, team, charlie_team):
    finished_result(team, problems["all-reduce"], 2.5)
    finished_result(charlie_team, problems["tp-linear"], 1.5, profile="h200x4")
    code, out, _ = run(capsys, "leaderboard", "--category", "collective")
    assert code == 0
    assert "collective, profile cpu" in out and "Alice's Kernels" in out and "2.50x" in out
    assert "Charlie Ltd" not in out
    code, out, _ = run(capsys, "leaderboard", "--profile", "h200x4")
    assert "Charlie Ltd" in out and "Alice's Kernels" not in out


def test_the_leaderboards_solved_column_counts_problems_of_how_many(capsys, site, problems, team):
    finished_result(team, problems["all-reduce"], 2.5)
    code, out, _ = run(capsys, "leaderboard")
    [line] = [line for line in out.splitlines() if "Alice's Kernels" in line]
    assert code == 0 and "1 of 3" in line and "33%" in line
    assert "weighted" not in out  # every weight 1: the share is the count over the total


def test_on_a_weighted_board_the_leaderboards_shares_say_so(capsys, site, problems, team):
    problems["all-reduce"].weight = 2.0
    problems["all-reduce"].save()
    finished_result(team, problems["all-reduce"], 2.5)
    code, out, _ = run(capsys, "leaderboard")
    assert code == 0 and "fast_1 (weighted)" in out and "fast_2 (weighted)" in out
    assert "solved counts problems" in " ".join(out.split())  # the caption, however wrapped
    [line] = [line for line in out.splitlines() if "Alice's Kernels" in line]
    assert "1 of 3" in line and "50%" in line  # a weight of 2 of 4, one problem of three


def test_the_leaderboard_of_one_problem(capsys, site, problems, team):
    finished_result(team, problems["all-reduce"], 2.5)
    code, out, _ = run(capsys, "leaderboard", "--problem", "all-reduce")
    assert code == 0 and "all-reduce, profile cpu" in out and "2.50x" in out


def test_example_rows_are_labelled_and_unranked(capsys, site, problems, team, charlie_team):
    finished_result(team, problems["all-reduce"], 2.5)
    finished_result(charlie_team, problems["all-reduce"], 3.0, example_label="Example: fast")
    for argv in (["leaderboard"], ["leaderboard", "--problem", "all-reduce"]):
        code, out, _ = run(capsys, *argv)
        lines = [line for line in out.splitlines() if "Example: fast" in line]
        assert code == 0 and len(lines) == 1 and "—" in lines[0] and "3.00x" in lines[0]
        assert out.index("Example: fast") < out.index("Alice's Kernels"), argv
        assert "1 " in next(line for line in out.splitlines() if "Alice's Kernels" in line)


def test_an_unknown_problem_gets_the_closest_slugs(capsys, site, problems):
    code, _, err = run(capsys, "leaderboard", "--problem", "allreduce")
    assert code == 3
    assert "No published problem 'allreduce'; did you mean all-reduce" in err
    assert "secret-op" not in err


def test_an_unknown_category_is_an_error(capsys, site, problems):
    code, _, err = run(capsys, "leaderboard", "--category", "astrology")
    assert code == 3 and "pkb: error:" in err


# submit


@pytest.fixture
def bundle(tmp_path, problems) -> Path:
    path = tmp_path / "kernels.zip"
    path.write_bytes(solving("all-reduce", "all-gather"))
    return path


def test_submit_uploads_the_bundle(capsys, as_alice, alice, bundle):
    code, _, err = run(capsys, "submit", str(bundle))
    assert code == 0
    submission = Submission.objects.get()
    assert (submission.user, submission.bundle_name) == (alice, "kernels.zip")
    expected = f"Submitted #{submission.pk} for Alice's Kernels: a ranked run on cpu, 2 problem(s)"
    assert f"{expected}, queued." in err


def test_a_bad_bundle_gets_the_sites_reason(capsys, as_alice, tmp_path, problems):
    path = tmp_path / "bad.zip"
    path.write_bytes(zip_bundle({"no-such-problem.py": "def solution(x):\n    return x\n"}))
    code, _, err = run(capsys, "submit", str(path))
    assert code == 3
    assert "pkb: error:" in err and "no-such-problem" in err
    assert not Submission.objects.exists()


def test_a_missing_bundle_file_is_a_usage_error(capsys, as_alice, tmp_path):
    code, _, err = run(capsys, "submit", str(tmp_path / "nope.zip"))
    assert code == 2 and "nope.zip: no such file" in err


def test_submitting_needs_a_token(capsys, site, bundle):
    code, _, err = run(capsys, "submit", str(bundle))
    assert code == 3 and "no token" in err


def reported(slug, status=ProblemStatus.PASSED, **kwargs):
    if status == ProblemStatus.PASSED:
        kwargs = {"time_us": 80.0, "ref_time_us": 120.0, "speedup": 1.5, **kwargs}
        kwargs.setdefault("cases", [CaseResult("dev-tiny", "float32", True, time_us=80.0)])
    return Reported(slug, status, 4, **kwargs)


def evaluate_between_polls(monkeypatch, *, outcome=EvaluationOutcome.DONE, results, reason=""):
    """The CLI's sleeps drive the evaluation on: started with progress, then finished."""
    polls: list[float] = []

    def sleep(seconds: float) -> None:
        eid = str(Submission.objects.get().evaluation_id)
        if not polls:
            evaluation_start(evaluation_id=eid, host="gpu-host-1")
            evaluation_progress(evaluation_id=eid, done=1, total=2, current="all-reduce")
        else:
            message = finished_message(
                evaluation_id=eid, outcome=outcome, results=results, reason=reason
            )
            evaluation_finish(message=message)
        polls.append(seconds)

    monkeypatch.setattr(common, "sleep", sleep)
    return polls


def test_submit_wait_follows_it_to_its_results(capsys, monkeypatch, as_alice, bundle):
    polls = evaluate_between_polls(
        monkeypatch,
        results=[reported("all-reduce"), reported("all-gather", speedup=0.8, time_us=1840.0)],
    )
    code, out, err = run(capsys, "submit", str(bundle), "--wait", "--poll", "0.5")
    assert code == 0
    assert polls == [0.5, 0.5]
    assert "2/2" in err  # the progress bar, finished
    assert "done" in out and "all-gather" in out and "0.80x" in out and "1.50x" in out
    assert "120.0 µs" in out and "1.84 ms" in out  # the site's convention (portal/formats.py)


def test_submit_wait_fails_when_a_problem_fails(capsys, monkeypatch, as_alice, bundle):
    wrong = reported("all-gather", ProblemStatus.WRONG_ANSWER, message="rank 2: element 17 differs")
    evaluate_between_polls(monkeypatch, results=[reported("all-reduce"), wrong])
    code, out, _ = run(capsys, "submit", str(bundle), "--wait")
    assert code == 1
    assert "wrong answer" in out and "rank 2: element 17 differs" in out


def test_submit_wait_fails_when_the_evaluation_fails(capsys, monkeypatch, as_alice, bundle):
    evaluate_between_polls(
        monkeypatch, outcome=EvaluationOutcome.FAILED, results=[], reason="the host ran out of disk"
    )
    code, out, _ = run(capsys, "submit", str(bundle), "--wait")
    assert code == 1
    assert "failed: the host ran out of disk" in out


def test_submit_wait_rides_out_a_429(capsys, monkeypatch, as_alice, bundle):
    # Three requests a minute: the upload and one poll pass, the next poll is told to wait.
    monkeypatch.setattr(throttling.UserRateThrottle, "rate", "2/min", raising=False)
    waits: list[float] = []

    def sleep(seconds: float) -> None:
        waits.append(seconds)
        if len(waits) == 1:  # the ordinary pause after the first poll: the host finishes
            submission = Submission.objects.get()
            message = finished_message(
                evaluation_id=str(submission.evaluation_id),
                outcome=EvaluationOutcome.DONE,
                results=[reported("all-reduce"), reported("all-gather")],
            )
            evaluation_start(evaluation_id=str(submission.evaluation_id), host="h")
            evaluation_finish(message=message)
        else:  # waiting out the 429: the budget comes back
            monkeypatch.setattr(throttling.UserRateThrottle, "rate", "100/min", raising=False)

    monkeypatch.setattr(common, "sleep", sleep)
    code, out, _ = run(capsys, "submit", str(bundle), "--wait")
    assert code == 0, out
    assert waits[0] == cli.POLL_S and 1 <= waits[1] <= 60


# status and cancel


def test_status_shows_the_results(capsys, as_alice, alice, team, problems):
    submission = SubmissionFactory(team=team, user=alice, done=True, problems=["all-reduce"])
    ProblemResultFactory(submission=submission, problem=problems["all-reduce"], speedup=3.0)
    code, out, _ = run(capsys, "status", str(submission.pk))
    assert code == 0 and "3.00x" in out and "passed" in out


def test_status_of_a_disqualified_submission_fails(capsys, as_alice, alice, team, problems):
    submission = SubmissionFactory(team=team, user=alice, done=True, problems=["all-reduce"])
    ProblemResultFactory(submission=submission, problem=problems["all-reduce"], speedup=3.0)
    submission.disqualified_at = submission.finished_at
    submission.disqualification_reason = "copied team B's kernel"
    submission.save()
    code, out, _ = run(capsys, "status", str(submission.pk))
    assert code == 1 and "(disqualified: copied team B's kernel)" in out


def test_status_of_another_teams_submission_is_not_found(
    capsys, monkeypatch, site, charlie, alice, team
):
    theirs = SubmissionFactory(team=team, user=alice)
    monkeypatch.setenv("PKB_TOKEN", api_token_create(user=charlie, name="ci")[1])
    code, _, err = run(capsys, "status", str(theirs.pk))
    assert code == 3 and "No Submission matches the given query." in err


def test_cancel(capsys, as_alice, alice, team):
    queued = SubmissionFactory(team=team, user=alice)
    code, _, err = run(capsys, "cancel", str(queued.pk))
    assert code == 0 and f"Submission #{queued.pk}: cancelled." in err
    code, _, err = run(capsys, "cancel", str(queued.pk))
    assert code == 3 and "only a queued or running one can be cancelled" in err


# failures of the transport and the arguments


def test_an_unreachable_site_is_a_clear_error(capsys, monkeypatch):
    monkeypatch.setenv("PKB_URL", "http://127.0.0.1:9")
    code, _, err = run(capsys, "problems")
    assert code == 3 and "cannot reach http://127.0.0.1:9" in err


def test_a_url_without_a_scheme_is_refused(capsys):
    code, _, err = run(capsys, "--url", "kernels.example.org", "problems")
    assert code == 3 and "not a site address" in err


def test_a_throttled_request_says_when_to_retry(capsys, monkeypatch, as_alice, problems):
    monkeypatch.setattr(throttling.UserRateThrottle, "rate", "1/min", raising=False)
    assert run(capsys, "problems")[0] == 0
    code, _, err = run(capsys, "problems")
    assert code == 3 and "Request was throttled." in err and "(retry after" in err


def test_a_team_past_its_limit_is_told_when_to_retry(
    capsys, settings, as_alice, alice, team, bundle
):
    settings.PKB_SUBMISSIONS_PER_DAY = 1
    SubmissionFactory(team=team, user=alice, done=True)
    code, _, err = run(capsys, "submit", str(bundle))
    assert code == 3
    assert "used 1 of 1 ranked runs in the last 24 hours" in err and "(retry after" in err


@pytest.mark.parametrize(
    "argv", [[], ["submit"], ["status", "seven"], ["leaderboard", "--bogus"], ["fly"]]
)
def test_bad_arguments_exit_2(capsys, argv):
    with pytest.raises(SystemExit) as exited:
        cli.main(argv)
    assert exited.value.code == 2


def test_it_runs_as_a_program(site, problems):
    """`python -m portal.cli` in its own process, as the `pkb` script runs it."""
    env = {**os.environ, "PKB_URL": site}
    done = subprocess.run(
        [sys.executable, "-m", "portal.cli", "problems"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "all-reduce" in done.stdout


def test_it_loads_neither_the_orm_nor_torch():
    probe = "import sys, portal.cli.main; print(sorted(sys.modules))"
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=REPO, env=env, capture_output=True, text=True
    )
    modules = set(eval(done.stdout))  # a printed list of names
    assert "torch" not in modules and "django.db" not in modules
    assert not any(m.startswith(("django.db", "rest_framework")) for m in modules)


def test_the_leaderboard_shows_every_page_of_rows(capsys, site, problems):
    """The site sends a board's rows 50 a page; `pkb leaderboard` shows them all."""
    for n in range(55):
        team = TeamFactory(name=f"Team t{n:02}", slug=f"team-{n:02}")
        finished_result(team, problems["all-reduce"], 1.0 + n / 100)
    for argv in (["leaderboard"], ["leaderboard", "--problem", "all-reduce"]):
        code, out, _ = run(capsys, *argv)
        shown = {word for word in out.split() if word.startswith("t") and word[1:].isdigit()}
        assert code == 0 and shown == {f"t{n:02}" for n in range(55)}, argv
