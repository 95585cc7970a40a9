"""Issue 23's test of the board that luck cannot climb: a bundle whose solutions are the
references themselves, judged again and again by the real evaluator on the CPU profile and
recorded through the services a host's report reaches, never counts a problem as faster
and never ranks above the reference row.

Before issue 23 a team's best result per problem counted: each resubmission of the same
bundle was one more draw, and the best of them climbed above 1.0x by noise alone. On 2
cores (2026-11-25) one run of this test drew point speedups up to 1.98x for the references
while their intervals spanned about 0.15x to 6x: the best of three draws would have
counted all three problems as faster.
"""

from __future__ import annotations

import dataclasses
import inspect
import json

import pytest

from evaluator.contract import EvaluationOutcome, finished_message
from evaluator.host.profiles import get_profile
from evaluator.host.settings import load_settings
from evaluator.intake.bundle import read_bundle
from portal.leaderboard.selectors import BASELINE_NAME, leaderboard_rows, problem_board
from portal.problems.models import Category, Problem
from portal.submissions.models import Submission
from portal.submissions.services import evaluation_finish, evaluation_start, submission_create
from problems.collective import all_gather, all_reduce, reduce_scatter
from tests.evaluator.judging import evaluate_elsewhere
from tests.portal.bundles import upload, zip_bundle
from tests.portal.factories import ProblemFactory

pytestmark = pytest.mark.django_db

REFERENCES = (all_reduce, all_gather, reduce_scatter)  # cheap on 2 cores: n <= 4096
JUDGED = 3  # separate submissions of the same bundle
HEADER = "import torch\nimport torch.distributed as dist\n\n\n"


def reference_bundle() -> bytes:
    """The references' own `solution` functions, one file per problem."""
    return zip_bundle(
        {f"{m.PROBLEM.slug}.py": HEADER + inspect.getsource(m.solution) for m in REFERENCES}
    )


def judge(submission: Submission) -> None:
    """What a CPU host does with the submission, reported as a host reports it."""
    with submission.bundle.open("rb") as fh:
        data = fh.read()
    slugs = list(submission.problems)
    bundle = read_bundle(submission.bundle_name, data, known_slugs=slugs)
    settings = load_settings({"PKB_SEED_SECRET": "test-secret-0123456789", "PKB_PROFILE": "cpu"})
    # Two ranks rather than the profile's four: the same judge, in half the wall time.
    profile = dataclasses.replace(get_profile("cpu"), world_size=2)
    eid = str(submission.evaluation_id)
    assert evaluation_start(evaluation_id=eid, host="cpu-test")
    results, environment = evaluate_elsewhere(
        bundle=bundle, slugs=slugs, profile=profile, settings=settings, evaluation_id=eid
    )
    message = finished_message(
        evaluation_id=eid,
        outcome=EvaluationOutcome.DONE,
        results=results,
        environment=environment,
    )
    assert evaluation_finish(message=json.loads(json.dumps(message)))  # as it crosses Redis


@pytest.fixture
def judged(alice, team, problems):
    ProblemFactory(slug="reduce-scatter", title="Reduce-scatter", category=Category.COLLECTIVE)
    # Every published problem is one the bundle solves: a problem left unsolved would keep
    # the team under the reference row whatever its speedups.
    Problem.objects.published().exclude(slug__in=[m.PROBLEM.slug for m in REFERENCES]).update(
        status=Problem.Status.RETIRED
    )
    for _ in range(JUDGED):
        submission = submission_create(user=alice, upload=upload(reference_bundle()))
        judge(submission)
    return team


def test_resubmitting_the_references_never_counts_as_faster(judged, problems):
    submissions = Submission.objects.filter(team=judged)
    assert [s.status for s in submissions] == [Submission.Status.DONE] * JUDGED
    assert len({json.dumps(s.code_digests, sort_keys=True) for s in submissions}) == 1
    rows = leaderboard_rows(profile="cpu")
    names = [r.team_name for r in rows]
    [row] = [r for r in rows if r.team_slug == judged.slug]
    assert row.score.solved == row.score.total == len(REFERENCES)
    assert row.score.faster == 0 and row.score.fast_1 == 0.0 and row.score.fast_0 == 1.0
    assert names.index(BASELINE_NAME) < names.index(row.team_name)
    for module in REFERENCES:
        problem = Problem.objects.get(slug=module.PROBLEM.slug)
        board = problem_board(problem=problem, profile="cpu")
        [entry] = board.ranking
        assert entry.run_count == JUDGED  # every draw pooled, none picked
        assert entry.speedup_low is not None and entry.speedup_low <= 1.0, entry
        assert not entry.is_faster
        assert [e.kind for e in board.entries] == ["baseline", "team"]
