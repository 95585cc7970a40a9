"""The judge's clock holds everything a runner does between the inputs and the outputs, on
real gloo rank processes: a sleep inside the calls, in a hook on the harness's copy of the
outputs (after the call returned), in the harness's reply, and in the serialising of its
reply and the unpickling of the judge's command are all timed, none hidden."""

from __future__ import annotations

import dataclasses

from evaluator.contract import ProblemStatus
from evaluator.host.profiles import get_profile
from evaluator.host.settings import load_settings
from evaluator.intake.bundle import read_bundle
from evaluator.judge.evaluate import evaluate_bundle
from tests.evaluator.archives import make_zip
from tests.evaluator.judging import sleeping_solution
from tests.evaluator.scratch import reachable_folder
from tests.redteam import attacks

SLEEP_S = 0.3

IN_THE_CALL = sleeping_solution(SLEEP_S)

# The whole work, and the sleep, deferred into the harness's copy of the output: a mode
# sees every torch call of the process without replacing any attribute (no tripwire).
IN_THE_COPY = f"""
import time
import torch
import torch.distributed as dist
from torch.overrides import TorchFunctionMode

class Deferred(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {{}}
        if getattr(func, "__name__", "") == "copy_" and getattr(args[1], "pkb_lazy", False):
            with torch._C.DisableTorchFunction():
                out = args[1].clone()
                dist.all_reduce(out)
                time.sleep({SLEEP_S})
                return func(args[0], out, **kwargs)
        return func(*args, **kwargs)

Deferred().__enter__()

def solution(x):
    with torch._C.DisableTorchFunction():
        out = x.clone()
    out.pkb_lazy = True
    return out
"""

IN_THE_REPLY = f"""
import time
import torch.distributed as dist
from multiprocessing.connection import Connection

_send = Connection.send_bytes

def _slow(self, data, *args):
    time.sleep({SLEEP_S})
    return _send(self, data, *args)

Connection.send_bytes = _slow

def solution(x):
    out = x.clone()
    dist.all_reduce(out)
    return out
"""

# The whole work, and a sleep, deferred past the copy of the output into the serialising
# of the reply (json.dumps) and the unpickling of the judge's command
# (ForkingPickler.loads): neither is on the watch list, so no wire trips. The output's
# copy in its room is only recorded (a mode, as above), and summed in place as the reply
# is written. Both run before the judge's stop stamp: the work is right and timed.
IN_THE_SHIPPING = f"""
import json
import time
import torch
import torch.distributed as dist
from multiprocessing.reduction import ForkingPickler
from torch.overrides import TorchFunctionMode

ROOMS = []

class Record(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        if getattr(func, "__name__", "") == "copy_" and getattr(args[1], "pkb_lazy", False):
            ROOMS.append(args[0])
        return func(*args, **(kwargs or {{}}))

Record().__enter__()
_dumps, _loads = json.dumps, ForkingPickler.loads

def _late_dumps(*args, **kwargs):
    with torch._C.DisableTorchFunction():
        while ROOMS:
            dist.all_reduce(ROOMS.pop(0))
    time.sleep({SLEEP_S})
    return _dumps(*args, **kwargs)

def _late_loads(*args, **kwargs):
    time.sleep({SLEEP_S})
    return _loads(*args, **kwargs)

json.dumps = _late_dumps
ForkingPickler.loads = _late_loads

def solution(x):
    with torch._C.DisableTorchFunction():
        out = x.clone()
    out.pkb_lazy = True
    return out
"""


def test_time_a_runner_spends_anywhere_in_a_round_is_on_the_judges_clock():
    files = {
        "rt-call.py": IN_THE_CALL,
        "rt-copy.py": IN_THE_COPY,
        "rt-reply.py": IN_THE_REPLY,
        "rt-ship.py": IN_THE_SHIPPING,
        "rt-after.py": attacks.HONEST,
    }
    slugs = ("rt-call", "rt-copy", "rt-reply", "rt-ship", "rt-after")
    catalog = {slug: attacks.problem(slug) for slug in slugs}
    settings = dataclasses.replace(
        load_settings({"PKB_SEED_SECRET": "clock-secret-0123456789"}),
        trials=1,
        warmup=1,
        iters=4,
        rounds=2,
        timed_checks=4,
        problem_timeout_s=60,
    )
    with reachable_folder("clock") as scratch_dir:
        results, _ = evaluate_bundle(
            read_bundle("clock.zip", make_zip(files), known_slugs=catalog),
            slugs=list(catalog),
            profile=dataclasses.replace(get_profile("cpu"), world_size=2),
            settings=dataclasses.replace(settings, scratch_dir=scratch_dir),
            evaluation_id="clock",
            problems=catalog,
        )
    in_call, in_copy, in_reply, in_shipping, after = results
    for result in (in_call, in_copy):
        # Right outputs: they pass, and every call's sleep is in its time.
        assert result.status == ProblemStatus.PASSED, result.message
        assert len(result.cases[0].rounds) == 2
        assert all(r["candidate_us"] >= SLEEP_S * 1e6 * 0.9 for r in result.cases[0].rounds)
        assert result.speedup < 0.1
    # Patching the pipe trips the wire as well; its sleep (once a round) is timed anyway.
    assert in_reply.flags == ["tampered"], in_reply.message
    rounds = in_reply.cases[0].rounds
    assert all(r["candidate_gross_us"] * 2 >= SLEEP_S * 1e6 * 0.9 for r in rounds)
    # Deferred into the reply's serialising and the command's unpickling: right, unflagged,
    # and both sleeps of each round's "go" (its unpickling, its reply) are in its time.
    assert in_shipping.status == ProblemStatus.PASSED, in_shipping.message
    assert in_shipping.flags == [], in_shipping.message
    for r in in_shipping.cases[0].rounds:  # two calls a round: a call's share is a sleep
        assert r["candidate_gross_us"] * 2 >= 2 * SLEEP_S * 1e6 * 0.9, r
    # The same worker judges an honest bundle right after all of them.
    assert after.status == ProblemStatus.PASSED and after.flags == [], after.message
