"""A hostile review of one-call-at-a-time judging (gloo, world size 2): attacks that try
to get a counted speedup the solution did not earn, each judged for real, each followed
by an honest bundle that must pass on the same worker.

- spin-doorbell: honest work, but the runner's own `spin_s` (an instance attribute,
  watched by no tripwire) raised, so the candidate's runner polls for the judge's doorbell
  instead of sleeping in poll(): its wake-ups cost less than the reference's runner's, whose
  echo round (the tare) is subtracted from both sides.
- spin-patch: the same through `rank_process.wait_readable`, a module function the runner
  calls at every doorbell and that no tripwire watches.
- late-writer: skips the all-reduce in the call and lets a thread write the right answer
  into the call's room after the report (deferring work past the report).
- early-report: swaps the runner's pipe to the judge (`_Runner.judge`, an instance
  attribute) for a proxy: bundle code sends each call's report before its work is done
  and drops the runner's own, then does the work into the room.
"""

from __future__ import annotations

import pytest

from evaluator.contract import ProblemStatus
from tests.evaluator.judging import judge_files, small_settings
from tests.redteam import attacks

# Its fixture judges every bundle inside the first test's time (minutes on 2 busy cores).
pytestmark = pytest.mark.timeout(900)

_FIND_RUNNER = """
import gc
from evaluator.candidate import runner as _runner_mod

def _runner():
    for obj in gc.get_objects():
        if isinstance(obj, _runner_mod._Runner):
            return obj
    return None
"""

SPIN_DOORBELL = (
    """
import torch.distributed as dist
"""
    + _FIND_RUNNER
    + """
DONE = [False]

def solution(x):
    if not DONE[0]:
        me = _runner()
        if me is not None:
            me.spin_s = 0.5  # poll for the doorbell: no wake-up from a blocked poll()
            print("pkb-redteam: runner spins for its doorbell", flush=True)
        DONE[0] = True
    out = x.clone()
    dist.all_reduce(out)
    return out
"""
)

SPIN_PATCH = """
import os
import time
import torch.distributed as dist
from evaluator import rank_process

def _spin(conn, spin_s):
    end = time.perf_counter() + 0.5
    while time.perf_counter() < end:
        if conn.poll(0):
            return
    conn.poll(None)

rank_process.wait_readable = _spin

def solution(x):
    out = x.clone()
    dist.all_reduce(out)
    return out
"""

LATE_WRITER = (
    """
import queue
import sys
import threading
import torch
import torch.distributed as dist
"""
    + _FIND_RUNNER
    + """
JOBS = queue.Queue()

def _worker():
    while True:
        out, view = JOBS.get()
        dist.all_reduce(out)  # one at a time, in call order on every rank
        view.copy_(out.view(torch.uint8).reshape(-1))

threading.Thread(target=_worker, daemon=True).start()

def _go_frame():
    frame = sys._getframe(1)
    while frame is not None and frame.f_code.co_name != "go":
        frame = frame.f_back
    return frame.f_locals if frame is not None else None

def solution(x):
    here, me = _go_frame(), _runner()
    if here is None or me is None or me.base is None:
        out = x.clone()
        dist.all_reduce(out)
        return out
    _, _, offset, room = here["pending"][here["call"]]
    view = me.base[offset : offset + x.numel() * x.element_size()]
    JOBS.put((x.clone(), view))  # the room gets the answer after the report
    return x.clone()  # this rank's own share, at once
"""
)

EARLY_REPORT = (
    """
import json
import sys
import torch
import torch.distributed as dist
"""
    + _FIND_RUNNER
    + """
class _Proxy:
    # The runner's pipe to the judge, but its per-call reports are dropped: bundle code
    # has sent them already, before its work was done.
    def __init__(self, conn):
        self.conn = conn
    def __getattr__(self, name):
        return getattr(self.conn, name)
    def send_bytes(self, data, *a, **k):
        try:
            if "call" in json.loads(data):
                return None
        except Exception:
            pass
        return self.conn.send_bytes(data, *a, **k)

def _frame(name):
    frame = sys._getframe(1)
    while frame is not None and frame.f_code.co_name != name:
        frame = frame.f_back
    return frame.f_locals if frame is not None else None

def solution(x):
    me, here = _runner(), _frame("go")
    if me is None or here is None:
        out = x.clone()
        dist.all_reduce(out)
        return out
    if not isinstance(me.judge, _Proxy):
        me.judge = _Proxy(me.judge)
    entry = {"kind": "tensor", "items": [[str(x.dtype).removeprefix("torch."), list(x.shape)]]}
    me.judge.conn.send_bytes(
        json.dumps({"step": here["step"], "call": here["call"], "entry": entry}).encode()
    )
    out = x.clone()
    dist.all_reduce(out)
    return out
"""
)

PEER_ARENA = """
import os
import mmap
import sys
import torch
import torch.distributed as dist
PEER = {}

def _peer_arena():
    me = os.getpid()
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == me:
            continue
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                if "pkb-arena" in os.readlink(f"/proc/{pid}/fd/{fd}"):
                    f = os.open(f"/proc/{pid}/fd/{fd}", os.O_RDONLY)
                    return pid, mmap.mmap(f, 0, prot=mmap.PROT_READ)
        except OSError:
            continue
    return None

def _go_frame():
    frame = sys._getframe(1)
    while frame is not None and frame.f_code.co_name != "go":
        frame = frame.f_back
    return frame.f_locals if frame is not None else None

def solution(x):
    if "arena" not in PEER:
        PEER["arena"] = _peer_arena()
        print(f"pkb-redteam: a peer's arena: {PEER['arena'] is not None}", flush=True)
    found = PEER["arena"]
    here = _go_frame()
    if found is None or here is None:
        return x.clone()  # no peer's inputs: a wrong answer
    dist.barrier()  # both judges have written this call's inputs
    offset = x.data_ptr() - here["base"].data_ptr()
    peer = torch.frombuffer(found[1], dtype=torch.uint8)[offset : offset + x.numel() * 4]
    return x + peer.view(torch.float32).view_as(x)  # the sum, no data moved by a collective
"""

ATTACKS = {
    "rv-spin-doorbell": SPIN_DOORBELL,
    "rv-spin-patch": SPIN_PATCH,
    "rv-late-writer": LATE_WRITER,
    "rv-early-report": EARLY_REPORT,
    "rv-peer-arena": PEER_ARENA,
}


@pytest.fixture(scope="module")
def judged():
    files: dict[str, str] = {"rv-honest-first.py": attacks.HONEST}
    for name, source in ATTACKS.items():
        files[f"{name}.py"] = source
        files[f"{name}-after.py"] = attacks.HONEST
    catalog = {path[:-3]: attacks.problem(path[:-3]) for path in files}
    settings = small_settings(
        "review-attacks-secret-0123456789",
        warmup=2,
        iters=40,
        rounds=4,  # two pairs of each order, after the settling pair
        timed_checks=40,  # every timed call is checked
        problem_timeout_s=90,
    )
    results = judge_files(files, catalog, settings, "review")
    for slug, r in results.items():
        print(slug, r.status, r.speedup, r.speedup_low, r.speedup_high, r.message)
    return results


def _caught(judged, name: str) -> None:
    result = judged[name]
    assert result.status == ProblemStatus.WRONG_ANSWER, (result.status, result.message)
    assert result.speedup is None
    after = judged[f"{name}-after"]
    assert after.status == ProblemStatus.PASSED, after.message


@pytest.mark.parametrize("name", ["rv-spin-doorbell", "rv-spin-patch"])
def test_a_runner_that_spins_for_its_doorbell_gains_nothing_counted(judged, name):
    # Honest work, cheaper wake-ups than the reference's runner. On the 2-core test host
    # it measured no gain (0.61-0.87x against honest 0.38-1.67x over two runs); the bound
    # is loose because gloo's noise on two shared cores is that wide. Not flagged: the
    # attribute and the function it changes are watched by no tripwire.
    result = judged[name]
    assert result.status == ProblemStatus.PASSED, result.message
    assert result.speedup is not None and result.speedup < 3.0, result.speedup
    assert judged[f"{name}-after"].status == ProblemStatus.PASSED


def test_work_a_thread_writes_into_the_room_after_the_report_is_not_seen(judged):
    _caught(judged, "rv-late-writer")


def test_a_report_sent_before_the_work_is_done_is_a_wrong_answer(judged):
    _caught(judged, "rv-early-report")


# Bundle code listed /proc/<pid>/fd of the processes it could see, found a judge's
# 'memfd:pkb-arena' and re-opened it (no pidfd_getfd, no ptrace), then read the other
# rank's input of the current call: a counted pass with no data moved (2026-11-29, gloo
# test host). Judges now close an arena's memfd once its runner has it (judge/link.py).
def test_a_rank_cannot_open_another_processs_arena_through_proc(judged):
    _caught(judged, "rv-peer-arena")
