"""`pkb` says what a running evaluation does before it counts problems: starting, then
compiling, then judging with its count; never "0/8" before the host compiled anything
(issue 40, item 9). `pkb submit --wait`'s bar reads the same stages (`stage_of`)."""

from __future__ import annotations

import pytest

from portal.cli import main as cli
from portal.submissions.models import Submission
from portal.submissions.services import evaluation_progress, evaluation_start
from tests.portal.factories import SubmissionFactory

pytestmark = pytest.mark.django_db(transaction=True)

TWO = ["all-reduce", "all-gather"]


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def started(alice, team) -> Submission:
    submission = SubmissionFactory(team=team, user=alice, problems=TWO)
    assert evaluation_start(evaluation_id=str(submission.evaluation_id), host="gpu-host-1")
    return submission


def test_status_of_a_started_run_says_starting_not_a_count(capsys, as_alice, started):
    code, out, _ = run(capsys, "status", str(started.pk))
    assert code == 0 and "starting: each solution is compiled next" in out
    assert "0/2" not in out


def test_status_of_a_compiling_run_says_compiling_not_a_count(capsys, as_alice, started):
    eid = str(started.evaluation_id)
    assert evaluation_progress(evaluation_id=eid, done=0, total=2, current="", phase="compiling")
    code, out, _ = run(capsys, "status", str(started.pk))
    assert code == 0 and "compiling: each solution is imported once" in out
    assert "0/2" not in out


def test_status_of_a_judging_run_counts_its_problems(capsys, as_alice, started):
    eid = str(started.evaluation_id)
    assert evaluation_progress(
        evaluation_id=eid, done=1, total=2, current="all-gather", phase="judging"
    )
    code, out, _ = run(capsys, "status", str(started.pk))
    assert code == 0 and "1/2 problems judged" in out
