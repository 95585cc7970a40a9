"""A candidate answers one call at a time (gloo, world size 2): no call sees a later call's
inputs, and nothing the candidate has seen is timed again (judge/rank.py, `hand_over`
and `candidate_first`; docs/security.md, "What a candidate sees").

Both attacks passed with speedups the board counted before the judge handed inputs over
call by call (2026-11-28, issue 39): the look-ahead at 2.3x (interval 1.15-3.21), the
replay of a re-run at 3.9x. Each must now be a wrong answer, and an honest solution must
pass right after it on the same worker.
"""

from __future__ import annotations

import pytest

from evaluator.contract import ProblemStatus
from tests.evaluator.judging import judge_files, small_settings
from tests.redteam import attacks

# Its fixture judges every bundle inside the first test's time (minutes on 2 busy cores).
pytestmark = pytest.mark.timeout(900)

# At a round's first call: every call's input of the round, through the runner's frame
# (views of the arena), reduced with ONE all_reduce; each later call of the round returns
# its slice. All data moves, but no call is a call any more.
LOOK_AHEAD = """
import sys
import torch
import torch.distributed as dist
AHEAD = {}

def _round():
    frame = sys._getframe(2)
    while frame is not None and frame.f_code.co_name != "go":
        frame = frame.f_back
    return frame.f_locals if frame is not None else {}

def solution(x):
    here = _round()
    pending = here.get("pending") or []
    first = here.get("call", 0) == 0
    if first or x.data_ptr() not in AHEAD:
        AHEAD.clear()
        xs = [kwargs["x"] for _, kwargs, _, _ in pending if "x" in kwargs] or [x]
        flat = torch.cat([t.reshape(-1) for t in xs])
        dist.all_reduce(flat)
        for t, out in zip(xs, flat.split([t.numel() for t in xs])):
            AHEAD[t.data_ptr()] = out.view_as(t).clone()
        print(f"pkb-redteam: one all_reduce for {len(xs)} calls", flush=True)
    return AHEAD.pop(x.data_ptr())
"""

# Honest, but keeps every output by its input's bytes and answers a seen input from what
# it kept; in its candidate-first pair it asks for more room than the reference needs on
# its first call, which used to run all its rounds again on the same inputs.
REPLAY_SEEN = """
import hashlib
import torch
import torch.distributed as dist
SEEN = {}
CALLS = [0]

def solution(x):
    CALLS[0] += 1
    key = hashlib.sha256(x.numpy().tobytes()).hexdigest()
    hit = torch.tensor([float(key in SEEN)])
    dist.all_reduce(hit, op=dist.ReduceOp.MIN)  # replay only where every rank can
    if hit.item():
        print("pkb-redteam: answered a seen input from the cache", flush=True)
        return SEEN[key]
    out = x.clone()
    dist.all_reduce(out)
    SEEN[key] = out
    if CALLS[0] == {short_at}:
        return torch.cat([out, torch.zeros(1 << 20)])
    return out
"""

# Settings below: 1 trial call, then pairs of a 2-call warm-up and a 3-call timed round;
# the candidate-first pair's first call is the candidate's 12th.
CANDIDATE_FIRST_CALL = 12


@pytest.fixture(scope="module")
def judged():
    files = {
        "ahead-look.py": LOOK_AHEAD,
        "ahead-after-look.py": attacks.HONEST,
        "ahead-replay.py": REPLAY_SEEN.replace("{short_at}", str(CANDIDATE_FIRST_CALL)),
        "ahead-after-replay.py": attacks.HONEST,
    }
    catalog = {path[:-3]: attacks.problem(path[:-3]) for path in files}
    settings = small_settings(
        "one-call-at-a-time-secret-0123",
        warmup=2,
        iters=6,
        rounds=2,
        timed_checks=6,  # every timed call checked: the verdict never rests on a draw
        problem_timeout_s=60,
    )
    return judge_files(files, catalog, settings, "one-call")


def test_a_call_that_reads_later_calls_inputs_finds_none_and_fails(judged):
    result = judged["ahead-look"]
    assert result.status == ProblemStatus.WRONG_ANSWER, (result.status, result.message)
    assert result.speedup is None
    after = judged["ahead-after-look"]
    assert after.status == ProblemStatus.PASSED, after.message


def test_an_input_seen_before_is_never_timed_again(judged):
    result = judged["ahead-replay"]
    assert result.status == ProblemStatus.WRONG_ANSWER, (result.status, result.message)
    assert "larger than the reference" in result.message or "returned float32" in result.message
    assert result.speedup is None
    after = judged["ahead-after-replay"]
    assert after.status == ProblemStatus.PASSED, after.message
