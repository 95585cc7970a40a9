"""Hostile outputs in a pair where the candidate's rounds go first (gloo, world size 2).

Pairs alternate which side goes first (evaluator/judge/problem_run.py). When the candidate
goes first the judge has no reference report yet: it reads the candidate's checked outputs
where the candidate says they are, bounded by the room the judge gave, and holds every
report against the reference's once that has run (judge/rank.py, `candidate_first`). Each
solution here is honest for its first calls (the trial, the settling pair and the first
pair, which go reference first) and hostile from the first call of the candidate-first
pair on: every hostile reply must be a wrong answer, never a pass or a broken judge, and
an honest solution must pass right after it on the same worker.
"""

from __future__ import annotations

import pytest

from evaluator.contract import ProblemStatus
from tests.evaluator.judging import judge_files, small_settings
from tests.redteam import attacks

# Its fixture judges every bundle inside the first test's time (minutes on 2 busy cores).
pytestmark = pytest.mark.timeout(900)

# Settings below: 1 trial call, then pairs of a 2-call warm-up and a 3-call timed round.
# The candidate makes 1 + (2 + 3) (settling pair) + (2 + 3) (first pair) calls before the
# candidate-first pair.
HONEST_CALLS = 11

HOSTILE = {
    "zero-stride": "x[:1].expand(1 << 34)",
    "sparse": "honest().to_sparse()",
    "meta": 'torch.empty(x.shape, device="meta")',
    "oversized": "torch.cat([honest(), torch.zeros(1 << 20)])",
    # Short of room on rank 1 only: rank 1's judge alone ran the candidate's rounds again
    # (in the reference's rooms), its barrier waiting for judges that had moved on, a
    # timeout instead of a verdict (judge/rank.py, `anyone`).
    "oversized-on-one-rank": (
        "torch.cat([honest(), torch.zeros(1 << 20)]) if dist.get_rank() == 1 else honest()"
    ),
    "foreign": "[1.0] * x.numel()",
    "wrong-shape": "honest()[:-1]",
    "wrong-values": "torch.zeros_like(x)",
    "tuple": "(honest(), honest())",
}

TEMPLATE = """
import torch
import torch.distributed as dist
CALLS = [0]

def solution(x):
    def honest():
        out = x.clone()
        dist.all_reduce(out)
        return out

    CALLS[0] += 1
    if CALLS[0] <= {honest_calls}:
        return honest()
    dist.all_reduce(torch.zeros(1))  # keep the ranks in step
    return {hostile}
"""


@pytest.fixture(scope="module")
def judged():
    files: dict[str, str] = {}
    for name, hostile in HOSTILE.items():
        files[f"po-{name}.py"] = TEMPLATE.format(honest_calls=HONEST_CALLS, hostile=hostile)
        files[f"po-after-{name}.py"] = attacks.HONEST
    catalog = {path[:-3]: attacks.problem(path[:-3]) for path in files}
    settings = small_settings(
        "pair-order-secret-0123456789",
        warmup=2,
        iters=6,
        rounds=2,
        timed_checks=6,  # every timed call is checked
        problem_timeout_s=30,
    )
    return judge_files(files, catalog, settings, "pair-order")


@pytest.mark.parametrize("name", list(HOSTILE))
def test_a_hostile_reply_in_a_candidate_first_pair_is_a_wrong_answer(judged, name):
    result = judged[f"po-{name}"]
    assert result.status == ProblemStatus.WRONG_ANSWER, (result.status, result.message)
    assert "a timed call" in result.message
    # It passed the reference-first pair and was caught in the candidate-first one.
    assert [r["first"] for r in result.cases[0].rounds] == ["reference"]
    after = judged[f"po-after-{name}"]
    assert after.status == ProblemStatus.PASSED, after.message
    assert [r["first"] for r in after.cases[0].rounds] == ["reference", "candidate"]


def test_shapes_are_held_against_the_reference_in_words(judged):
    message = judged["po-wrong-shape"].message
    assert "returned float32(255,) where the reference returns float32(256,)" in message
    assert "returned a list" in judged["po-foreign"].message
