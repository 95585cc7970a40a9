"""The candidate's sandbox (evaluator/host/bubblewrap.py) tried from inside, by bundle code
on two gloo ranks, each attack followed by an honest solution judged right after:

- unix sockets: one the test listens on in a folder of the repository (outside every
  folder the sandbox replaces), one in /run, one in /tmp, and PostgreSQL's where it has
  one: none accepts a connection, and the test's listeners see none;
- the sibling rank: ptrace and process_vm_readv refused;
- processes: only the candidate's own are visible, none of the host's or the judges';
- memory: the evaluation's processes together stay under its cap (a cgroup);
- the reference's runner in its own sandbox (GPU hosts; forced here on gloo), as the
  same user: its folder cannot be written and its processes are not visible.
"""

from __future__ import annotations

import os
import socket
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from evaluator.contract import ProblemResult, ProblemStatus
from evaluator.host import cgroups, reference_box
from evaluator.host.settings import load_settings
from tests.evaluator.judging import judge_files, small_settings
from tests.redteam import attacks

REPO = Path(__file__).resolve().parents[2]
POSTGRES_SOCKET = "/var/run/postgresql/.s.PGSQL.5432"

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0, reason="the sandbox's walls are for bundle code run as another user"
)

CONNECT = """
import socket

PATHS = {paths!r}

def solution(x):
    outcomes = []
    for path in PATHS:
        s = socket.socket(socket.AF_UNIX)
        s.settimeout(2)
        try:
            s.connect(path)
            outcomes.append(f"{{path}}: CONNECTED")
        except OSError as exc:
            outcomes.append(f"{{path}}: {{exc.strerror}}")
    raise RuntimeError(f"socket probe done: {{outcomes}}")
"""

PTRACE = """
import ctypes, os
import torch.distributed as dist

libc = ctypes.CDLL(None, use_errno=True)


class IoVec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]


def solution(x):
    me = os.getpid()
    pids = [int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) != me]
    siblings = []
    for pid in pids:
        try:
            if b"multiprocessing" in open(f"/proc/{pid}/cmdline", "rb").read():
                siblings.append(pid)
        except OSError:
            pass
    outcomes = []
    for pid in siblings:
        for request in (16, 0x4206):  # PTRACE_ATTACH, PTRACE_SEIZE
            r = libc.ptrace(request, pid, 0, 0)
            outcomes.append(f"ptrace {request:#x} {pid}: " + (
                "ATTACHED" if r == 0 else os.strerror(ctypes.get_errno())))
        buf = ctypes.create_string_buffer(8)
        local, remote = IoVec(ctypes.addressof(buf), 8), IoVec(0x400000, 8)
        r = libc.process_vm_readv(pid, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)
        outcomes.append(f"process_vm_readv {pid}: " + (
            "READ" if r >= 0 else os.strerror(ctypes.get_errno())))
    dist.barrier()  # both ranks probe while the other is alive
    raise RuntimeError(f"ptrace probe done: siblings {len(siblings)}: {outcomes}")
"""

# Each rank holds 700 MiB (touched, so resident): under the per-process cap, over the
# evaluation's together with what two ranks of PyTorch hold anyway.
HOARD = """
import time
import torch
import torch.distributed as dist

def solution(x):
    hoard = torch.ones(700 * 2**20, dtype=torch.uint8)
    dist.barrier()
    time.sleep(1)
    raise RuntimeError(f"memory probe done: held {hoard.numel() >> 20} MiB")
"""
CAP_MB = 1200

PROCESSES = """
import os

def solution(x):
    seen = []
    for pid in sorted(int(p) for p in os.listdir("/proc") if p.isdigit()):
        try:
            status = open(f"/proc/{pid}/status").read().splitlines()
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in status if ":" in line)
        seen.append((pid, fields["Name"].strip(), int(fields["Uid"].split()[0])))
    raise RuntimeError(f"process probe done: {len(seen)} processes: {seen}")
"""

# The reference's sandbox folder is the evaluation's scratch folder's sibling; bundle code
# knows its own scratch folder (its TMPDIR's parent).
REFERENCE_FOLDER = """
import os

def solution(x):
    folder = os.path.dirname(os.environ["TMPDIR"]) + "-reference"
    outcomes = []
    for path in (folder, folder + "/runner", folder + "/runner/tmp", folder + "/launcher"):
        try:
            with open(path + "/planted", "w") as f:
                f.write("x")
            outcomes.append(f"{path}: WROTE")
        except OSError as exc:
            outcomes.append(f"{path}: {exc.strerror}")
    raise RuntimeError(f"reference folder probe done: {outcomes}")
"""


class Listener:
    """A unix socket listening at `path`, counting the connections it accepts."""

    def __init__(self, path: str) -> None:
        self.path, self.accepted = path, 0
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.bind(path)
        os.chmod(path, 0o777)  # the candidate user may write it: only the sandbox stands
        self.sock.listen(8)
        self.sock.settimeout(0.2)
        self.running = True
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self) -> None:
        while self.running:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.accepted += 1
            conn.close()

    def close(self) -> None:
        self.running = False
        self.thread.join()
        self.sock.close()
        Path(self.path).unlink(missing_ok=True)


@pytest.fixture
def listeners() -> Iterator[list[Listener]]:
    (REPO / "var").mkdir(exist_ok=True)
    folders = [
        tempfile.mkdtemp(prefix="pkb-walls-", dir=REPO / "var"),
        tempfile.mkdtemp(prefix="pkb-walls-", dir="/run"),
        tempfile.mkdtemp(prefix="pkb-walls-", dir="/tmp"),
    ]
    for folder in folders:
        os.chmod(folder, 0o755)
    made = [Listener(f"{folder}/host.sock") for folder in folders]
    yield made
    for listener in made:
        listener.close()
    for folder in folders:
        os.rmdir(folder)


def _each_then_honest(probes: dict[str, str]) -> dict[str, str]:
    """Each probe's file, and an honest solution judged right after it."""
    files = {}
    for name, source in probes.items():
        files[f"rt-{name}.py"] = source
        files[f"rt-after-{name}.py"] = attacks.HONEST
    return files


def _listed(message: str) -> list[tuple[int, str, int]]:
    """The (pid, name, uid) list the process probe raised with."""
    listing = message.split("processes: ", 1)[1]
    return eval(listing[: listing.rindex("]") + 1])  # noqa: S307 - our own repr


def _judged(files: dict[str, str], **overrides: Any) -> dict[str, ProblemResult]:
    catalog = {slug: attacks.problem(slug) for slug in (Path(f).stem for f in files)}
    settings = small_settings(
        "walls-secret-0123456789",
        warmup=1,
        iters=8,
        rounds=1,
        problem_timeout_s=60,
        **overrides,
    )
    results = judge_files(files, catalog, settings, "walls")
    for slug, r in results.items():
        if slug.startswith("rt-after-"):
            assert r.status == ProblemStatus.PASSED, (slug, r.message)
    return results


def test_no_host_unix_socket_is_within_reach(listeners):
    paths = [listener.path for listener in listeners]
    if os.path.exists(POSTGRES_SOCKET):
        paths.append(POSTGRES_SOCKET)
    files = {"rt-sockets.py": CONNECT.format(paths=paths), "rt-after-sockets.py": attacks.HONEST}
    r = _judged(files)["rt-sockets"]
    assert r.status == ProblemStatus.RUNTIME_ERROR and "socket probe done" in r.message, r.message
    assert "CONNECTED" not in r.message, r.message
    assert all(path in r.message for path in paths)
    assert [listener.accepted for listener in listeners] == [0, 0, 0]


def test_the_sibling_rank_cannot_be_traced_or_read_and_no_other_process_is_visible():
    results = _judged(_each_then_honest({"ptrace": PTRACE, "processes": PROCESSES}))
    traced = results["rt-ptrace"]
    assert "ptrace probe done: siblings 1:" in traced.message, traced.message
    assert "ATTACHED" not in traced.message and "READ" not in traced.message, traced.message
    assert traced.message.count("Operation not permitted") == 3, traced.message
    seen = results["rt-processes"]
    assert "process probe done" in seen.message, seen.message
    listed = _listed(seen.message)
    # The sandbox's init and holder, and the two ranks with their launchers' children:
    # all the candidate user's; no judge, no reference runner, nothing of the host.
    candidate = load_settings({}).candidate_user
    assert candidate is not None
    assert len(listed) <= 6 and {uid for _, _, uid in listed} == {candidate.uid}, listed


def test_the_ranks_together_stay_under_the_evaluations_memory_cap():
    base = cgroups._v2_base() or cgroups._v1_base()
    assert base is not None
    before = set(base.glob("pkb-eval-*"))  # a killed worker's, from other tests
    files = {"rt-hoard.py": HOARD, "rt-after-hoard.py": attacks.HONEST}
    r = _judged(files, evaluation_memory_bytes=CAP_MB << 20)["rt-hoard"]
    assert r.status == ProblemStatus.RUNTIME_ERROR, r.message
    assert "killed by SIGKILL" in r.message and "memory probe done" not in r.message, r.message
    assert set(base.glob("pkb-eval-*")) <= before  # the evaluation's cgroup went with it


@pytest.mark.parametrize("under", ["tmp", "repository"])
def test_the_references_own_sandbox_is_out_of_reach(monkeypatch, under):
    """Where the reference's runner runs as the candidate user (in a sandbox of its own),
    bundle code can neither write its folder, wherever the scratch folders are (under /tmp,
    which the candidate's sandbox replaces, or in the repository, which it shows read-only),
    nor see its processes; honest code is judged right after, against that runner."""
    monkeypatch.setattr(reference_box, "SANDBOXED_BACKENDS", frozenset({"gloo", "nccl"}))
    made: list[reference_box.ReferenceBox | None] = []
    start = reference_box.start
    monkeypatch.setattr(reference_box, "start", lambda *args: made.append(start(*args)) or made[-1])
    if under == "repository":
        (REPO / "var").mkdir(exist_ok=True)
        monkeypatch.setattr(tempfile, "tempdir", str(REPO / "var"))
    results = _judged(
        _each_then_honest({"reference-folder": REFERENCE_FOLDER, "processes": PROCESSES})
    )
    probe = results["rt-reference-folder"].message
    assert "reference folder probe done" in probe and "WROTE" not in probe, probe
    listed = _listed(results["rt-processes"].message)
    assert len(listed) <= 6, listed  # the candidate's own, as without the reference's box
    box = made[0]
    assert len(made) == 1 and box is not None  # the reference's runners ran in it
    assert box.folder.parent.parent == Path(tempfile.gettempdir()) and not box.folder.exists()
