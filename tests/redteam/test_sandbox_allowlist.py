"""The sandbox shows bundle code an allowlist and fails closed (issue 50, and issue 39's
sibling descriptors), tried from inside by bundle code on two gloo ranks, each attack
followed by an honest solution judged right after on the same worker:

- a ghost socket (bound, then unlinked, kept open) and one in a 0700 folder of root's,
  as gunicorn's control socket: the sandbox still starts (they once made it fall back);
- a late socket, bound in the repository's var/ after the sandbox started: out of reach;
- the portal's files (var/, .env): not there;
- inherited descriptors: the resource tracker's is /dev/null, so nothing bundle code
  writes there reaches the tracker (root, outside the sandbox) or unlinks a host name;
- disk filling: /tmp, /dev/shm, TMPDIR and HOME are tmpfs of a capped size, the bundle's
  own folder is read-only;
- /sys/fs/cgroup: empty;
- the sibling rank's descriptors and memory: pidfd_getfd refused, /proc/<pid>/mem
  refused (every rank is not dumpable), and no rank can make itself dumpable again;
- a host whose sandbox cannot start judges nothing: a platform fault, saying why.
"""

from __future__ import annotations

import dataclasses
import os
import re
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from evaluator.contract import (
    FAULT_SANDBOX,
    SANDBOX_FAULT,
    EvaluationOutcome,
    EvaluationRequest,
    ProblemStatus,
)
from evaluator.host.profiles import get_profile
from tests.evaluator.archives import make_zip
from tests.evaluator.judging import judge_files, small_settings
from tests.evaluator.scratch import reachable_folder
from tests.redteam import attacks
from tests.redteam.test_sandbox_walls import Listener

REPO = Path(__file__).resolve().parents[2]
TMP_MB = 64

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0, reason="the sandbox's walls are for bundle code run as another user"
)

WALLS = """
import os, socket
from multiprocessing import resource_tracker

SOCKETS = {sockets!r}
PORTAL = {portal!r}
SHM = {shm!r}

def solution(x):
    tracker = resource_tracker._resource_tracker._fd
    out = [f"tracker: {{os.readlink(f'/proc/self/fd/{{tracker}}')}}"]
    os.write(tracker, f"REGISTER:/{{SHM}}:shared_memory\\n".encode())
    for path in SOCKETS:
        s = socket.socket(socket.AF_UNIX)
        try:
            s.connect(path)
            out.append(f"{{path}}: CONNECTED")
        except OSError as exc:
            out.append(f"{{path}}: {{exc.strerror}}")
    for path in PORTAL:
        try:
            with open(path, "rb") as f:
                out.append(f"{{path}}: READ {{f.read(16)!r}}")
        except OSError as exc:
            out.append(f"{{path}}: {{exc.strerror}}")
    out.append(f"cgroup: {{sorted(os.listdir('/sys/fs/cgroup'))}}")
    raise RuntimeError(f"walls probe done: {{out}}")
"""

DISK = """
import os

def fill(path, limit=200 << 20):
    written, chunk = 0, b"x" * (1 << 20)
    try:
        with open(path, "wb") as f:
            while written < limit:
                f.write(chunk)
                f.flush()
                written += len(chunk)
        why = "no error"
    except OSError as exc:
        why = exc.strerror
    try:
        os.remove(path)
    except OSError:
        pass
    return f"{path}: {written >> 20} MiB, {why}"

def solution(x):
    scratch = os.path.dirname(os.environ["TMPDIR"])
    folders = ["/tmp", "/var/tmp", "/dev/shm", os.environ["TMPDIR"], os.environ["HOME"]]
    out = [fill(f"{folder}/fill-{os.getpid()}") for folder in folders]
    out.append(fill(f"{scratch}/bundle/fill-{os.getpid()}"))
    raise RuntimeError(f"disk probe done: {out}")
"""

PIDFD = """
import ctypes, os
import torch.distributed as dist

libc = ctypes.CDLL(None, use_errno=True)
PIDFD_OPEN, PIDFD_GETFD = 434, 438  # the same on x86-64 and arm64

def solution(x):
    me = os.getpid()
    siblings = []
    for p in os.listdir("/proc"):
        if p.isdigit() and int(p) != me:
            try:
                if b"multiprocessing" in open(f"/proc/{p}/cmdline", "rb").read():
                    siblings.append(int(p))
            except OSError:
                pass
    out = []
    for pid in siblings:
        pidfd = libc.syscall(PIDFD_OPEN, pid, 0)
        if pidfd < 0:
            out.append(f"pidfd_open {pid}: {os.strerror(ctypes.get_errno())}")
            continue
        for fd in range(3, 12):
            got = libc.syscall(PIDFD_GETFD, pidfd, fd, 0)
            err = ctypes.get_errno()
            out.append(f"getfd {fd}: " + ("GOT" if got >= 0 else os.strerror(err)))
    for pid in siblings:
        try:
            with open(f"/proc/{pid}/maps") as maps, open(f"/proc/{pid}/mem", "rb") as mem:
                mem.seek(int(maps.readline().split("-")[0], 16))
                mem.read(16)
                out.append("mem: READ")
        except OSError as exc:
            out.append(f"mem: {exc.strerror}")
    done = libc.prctl(4, 1, 0, 0, 0)  # PR_SET_DUMPABLE: open this rank to its sibling again
    out.append("dumpable: " + ("SET" if done == 0 else os.strerror(ctypes.get_errno())))
    dist.barrier()  # both ranks probe while the other is alive
    raise RuntimeError(f"pidfd probe done: siblings {len(siblings)}: {out}")
"""


@pytest.fixture
def ghosts() -> Iterator[list[str]]:
    """Sockets the old sandbox tried to cover and could not, which made it fall back: one
    unlinked while still listening, one in a folder only root may enter."""
    ghost = socket.socket(socket.AF_UNIX)
    path = tempfile.mktemp(prefix="pkb-ghost-", suffix=".sock", dir="/tmp")
    ghost.bind(path)
    ghost.listen(1)
    os.unlink(path)
    private = Path(tempfile.mkdtemp(prefix="pkb-ctl-", dir=Path.home()))
    private.chmod(0o700)
    ctl = socket.socket(socket.AF_UNIX)
    ctl.bind(str(private / "gunicorn.ctl"))
    ctl.listen(1)
    yield [path, str(private / "gunicorn.ctl")]
    ghost.close()
    ctl.close()
    (private / "gunicorn.ctl").unlink()
    private.rmdir()


@pytest.fixture
def portal_files() -> Iterator[list[str]]:
    """A readable file in the repository's var/, where the embedded setup keeps its
    database and uploads, and the .env that holds its secret key."""
    (REPO / "var").mkdir(exist_ok=True)
    secret = Path(tempfile.mkstemp(prefix="pkb-walls-db-", dir=REPO / "var")[1])
    secret.write_text("SQLite format 3")
    secret.chmod(0o644)
    yield [str(secret), str(REPO / ".env")]
    secret.unlink()


@pytest.fixture
def host_shm() -> Iterator[Path]:
    """A host /dev/shm name, which the tracker (root) would unlink at its end had bundle
    code registered it there."""
    path = Path(tempfile.mkstemp(prefix="pkb-walls-shm-", dir="/dev/shm")[1])
    yield path
    path.unlink(missing_ok=True)


def _late_listener(folder: Path, made: list[Listener]):
    """An on_progress hook: before the first problem, so after the sandbox started, a
    listener binds in the repository's var/."""

    def hook(done: int, total: int, current: str) -> None:
        if not made:
            made.append(Listener(str(folder / "late.sock")))

    return hook


def _judge(files: dict[str, str], **options) -> dict:
    catalog = {slug: attacks.problem(slug) for slug in (Path(f).stem for f in files)}
    settings = small_settings(
        "allowlist-secret-0123456789",
        warmup=1,
        iters=8,
        rounds=1,
        problem_timeout_s=60,
        sandbox_tmp_bytes=TMP_MB << 20,
    )
    results = judge_files(files, catalog, settings, "allowlist", **options)
    for slug, r in results.items():
        if slug.startswith("rt-after-"):
            assert r.status == ProblemStatus.PASSED, (slug, r.message)
    return results


def test_bundle_code_sees_the_allowlist_alone(ghosts, portal_files, host_shm):
    late_folder = Path(tempfile.mkdtemp(prefix="pkb-late-", dir=REPO / "var"))
    late_folder.chmod(0o755)
    made: list[Listener] = []
    sockets = [*ghosts, str(late_folder / "late.sock")]
    files = {
        "rt-walls.py": WALLS.format(sockets=sockets, portal=portal_files, shm=host_shm.name),
        "rt-after-walls.py": attacks.HONEST,
        "rt-disk.py": DISK,
        "rt-after-disk.py": attacks.HONEST,
        "rt-pidfd.py": PIDFD,
        "rt-after-pidfd.py": attacks.HONEST,
    }
    try:
        results = _judge(files, on_progress=_late_listener(late_folder, made))
    finally:
        for listener in made:
            listener.close()
        late_folder.rmdir()
    walls = results["rt-walls"].message
    assert "walls probe done" in walls, walls
    assert "CONNECTED" not in walls and "READ" not in walls, walls
    assert made and made[0].accepted == 0
    assert "cgroup: []" in walls, walls
    assert "tracker: /dev/null" in walls, walls
    assert host_shm.exists()  # the evaluation's end stopped no tracker with it registered
    disk = results["rt-disk"].message
    assert "disk probe done" in disk, disk
    # Each writable folder is full at its cap, none past it (nothing is left on disk).
    assert disk.count("No space left on device") == 5, disk
    assert all(int(n) <= TMP_MB for n in re.findall(r"(\d+) MiB, No space", disk)), disk
    assert re.search(r"bundle/fill-\d+: 0 MiB, Read-only file system", disk), disk
    pidfd = results["rt-pidfd"].message
    assert "pidfd probe done: siblings 1:" in pidfd, pidfd
    assert "GOT" not in pidfd and "Operation not permitted" in pidfd, pidfd
    # Its memory: each rank is not dumpable, and cannot make itself so again.
    assert "mem: READ" not in pidfd and "mem: Permission denied" in pidfd, pidfd
    assert "dumpable: Operation not permitted" in pidfd, pidfd


def test_a_host_whose_sandbox_cannot_start_judges_nothing_and_says_why():
    """A platform fault (a FAILED outcome: not charged), never a weaker sandbox and never
    the team's compile error: here a folder the settings bind is missing."""
    # Here, not at the top: the worker's module needs redis, which a GPU image running
    # this folder's GPU tests does not have.
    from evaluator.host.run import run_evaluation

    with reachable_folder("allowlist-closed") as scratch_dir:
        settings = small_settings(
            "allowlist-secret-0123456789",
            scratch_dir=scratch_dir,
            sandbox_shared=(Path("/nonexistent-pkb-folder"),),
        )
        bundle = make_zip({"honest.py": attacks.HONEST})
        request = EvaluationRequest.build(
            evaluation_id="ev-closed",
            submission_id=1,
            profile="cpu",
            bundle_name="b.zip",
            bundle=bundle,
            problems=["honest"],
        ).to_json()
        sent: list[tuple[str, dict]] = []
        finished = run_evaluation(
            request,
            settings=settings,
            send=lambda name, message: sent.append((name, message)),
            profile=dataclasses.replace(get_profile("cpu"), world_size=2),
            problems={"honest": attacks.problem("honest")},
        )
    assert finished is not None and finished["outcome"] == EvaluationOutcome.FAILED.value
    assert SANDBOX_FAULT in finished["reason"] and not finished["results"], finished
    assert finished["fault"] == FAULT_SANDBOX  # what the portal retries elsewhere on
