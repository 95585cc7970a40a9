"""Confinement of the processes that run bundle code (compile pass and candidate ranks).

Stdlib only, and importable without torch: the launcher part (`python sandbox.py exec`)
runs in a fresh, single-threaded interpreter before the rank's own Python starts, which is
the only moment a process may still join a user namespace.

What it gives, each piece independent of the others and all best effort with a loud log:
- resource limits (evaluator/host/rlimits.py, `apply_limits` and `Limits`): CPU
  seconds, address space (CPU backends only: CUDA reserves terabytes of virtual
  addresses), open files, tasks, file size, no core dumps;
- a network namespace holding only a loopback (`NetworkJail`), shared by every process of
  one evaluation so that ranks still reach one another, created in a user namespace of its
  own, which also strips a root worker's capabilities from bundle code;
- a launcher that replaces the whole initial environment block (what /proc/self/environ
  shows) by the scrubbed one, so a rank cannot read the worker's secrets from it;
- an unprivileged identity (`Identity`, setting PKB_CANDIDATE_USER) for bundle code when
  the worker is root: the launcher drops supplementary groups, the gid and the uid before
  Python starts, and fails loudly (exit 70) rather than run bundle code as root;
- `not_dumpable`: trusted processes (worker, judges) refuse /proc/<pid>/environ and mem
  to processes without CAP_SYS_PTRACE;
- cleanup (`evaluator.host.cleanup`): the evaluating process becomes a child subreaper,
  so a process that a rank detached (double fork, setsid) comes back to it and is
  killed; /dev/shm entries created during an evaluation are removed.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import pwd
import re
import signal
import subprocess
import sys
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

_CLONE_NEWUSER = 0x10000000
_CLONE_NEWNET = 0x40000000
_PR_SET_PDEATHSIG = 1
_PR_SET_DUMPABLE = 4
# personality(2): this argument only reads the persona; this flag turns off randomisation.
_PERSONALITY_QUERY = 0xFFFFFFFF
_ADDR_NO_RANDOMIZE = 0x0040000
JAIL_START_TIMEOUT_S = 30.0

# What a process running bundle code keeps of the worker's environment: what toolchains
# need to find the GPU, compilers and libraries. Never the broker address, the seed secret
# or anything else of the host's: a solution's print(os.environ) lands in a log its team
# reads.
KEPT_VARIABLES = frozenset(
    {
        *("PATH", "HOME", "LANG", "TMPDIR", "TERM", "USER", "LOGNAME", "VIRTUAL_ENV"),
        *("LD_LIBRARY_PATH", "LIBRARY_PATH", "CPATH", "C_INCLUDE_PATH", "CPLUS_INCLUDE_PATH"),
        *("PYTHONPATH", "PYTHONUNBUFFERED", "CC", "CXX", "MAX_JOBS"),
    }
)
KEPT_PREFIXES = ("LC_", "CUDA", "NVIDIA_", "NCCL_", "NVSHMEM_", "TORCH_", "TRITON_", "OMP_")


class SandboxError(RuntimeError):
    """Bundle code cannot be confined as configured; never run it unconfined instead."""


@dataclass(frozen=True)
class Identity:
    """The unprivileged user that bundle code runs as when the worker is root."""

    name: str
    uid: int
    gid: int

    @classmethod
    def of(cls, name: str) -> Identity:
        entry = pwd.getpwnam(name)  # KeyError for an unknown name
        return cls(name=name, uid=entry.pw_uid, gid=entry.pw_gid)


def candidate_ids(identity: Identity | None) -> tuple[int, int]:
    """The uid and gid bundle code runs as: `identity`'s, or the worker's own."""
    return (identity.uid, identity.gid) if identity else (os.geteuid(), os.getegid())


def hand_over(paths: Iterable[Path], identity: Identity | None) -> None:
    """Make `paths` (folders, with everything inside) the candidate user's own, mode 0700.

    lchown: a symbolic link inside is changed itself, never what it points to."""
    if identity is None:
        return
    for top in paths:
        top.mkdir(parents=True, exist_ok=True)
        top.chmod(0o700)
        os.lchown(top, identity.uid, identity.gid)
        for root, dirs, files in os.walk(top):
            for name in [*dirs, *files]:
                os.lchown(os.path.join(root, name), identity.uid, identity.gid)


def candidate_file(path: Path, identity: Identity | None) -> None:
    """Create `path` (a log) for bundle code to write, in a folder it cannot write: so it
    cannot swap the file for a link to something the trusted side would then read."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        if identity is not None:
            os.fchown(fd, identity.uid, identity.gid)
    finally:
        os.close(fd)


def check_reachable(path: Path, identity: Identity | None) -> None:
    """Raise SandboxError unless the candidate user may pass through every folder above
    `path` (a 0700 parent, such as pytest's or /root, would stop bundle code cold)."""
    if identity is None:
        return
    for folder in [path, *path.parents]:
        st = folder.stat()
        if st.st_uid == identity.uid:
            ok = st.st_mode & 0o100
        elif st.st_gid == identity.gid:
            ok = st.st_mode & 0o010
        else:
            ok = st.st_mode & 0o001
        if not ok:
            raise SandboxError(
                f"{folder} cannot be entered by PKB_CANDIDATE_USER={identity.name} "
                f"(uid {identity.uid}); bundle code needs {path}: give it o+x"
            )


def scrubbed(env: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if k in KEPT_VARIABLES or k.startswith(KEPT_PREFIXES)}


def libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def fixed_layout() -> None:
    """Address-space randomisation off for what this process execs next: a runner.

    Each start of a runner otherwise places its stack, heap and libraries anew, and the
    same launch-bound calls read differently from one pair of runners to the next: over
    eleven same-code calibrations each on one H100 (2026-11-26), with it off the runs'
    medians spread 0.8% at 64K and 1.3% at 1M against 1.9% and 2.1% with it on
    (docs/measurements/2026-11-26-both-sides-stopped.md). Nothing is lost: bundle code
    runs whatever it likes in its own process anyway, and the judges, which read what a
    runner says, keep their randomisation."""
    with contextlib.suppress(Exception):
        lib = libc()
        current = lib.personality(_PERSONALITY_QUERY)
        if current != -1:
            lib.personality(current | _ADDR_NO_RANDOMIZE)


_TRACKER_FD = re.compile(r"\btracker_fd=(\d+)")


def no_tracker(args: list[str]) -> None:
    """The write end of multiprocessing's resource tracker, which spawn hands every child,
    replaced by /dev/null before bundle code runs: the tracker is the worker's (root,
    outside every sandbox and cap), and would buffer whatever is written to it and unlink
    the /dev/shm names registered there, as its user. The rank keeps the fd number, so
    its own registrations go nowhere."""
    found = next((m for a in args if (m := _TRACKER_FD.search(a))), None)
    if found is None:
        return
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, int(found.group(1)))
    os.close(null)


def not_dumpable() -> None:
    """Hide this process's /proc/<pid>/environ, mem and maps from unprivileged peers."""
    with contextlib.suppress(Exception):
        libc().prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)


def die_with_parent() -> None:
    with contextlib.suppress(Exception):
        libc().prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


# --- network ---------------------------------------------------------------------------

# Runs in a fresh interpreter: a user namespace (mapping our own ids) owning a network
# namespace whose only device is a loopback, brought up so ranks can reach one another.
_HOLDER = r"""
import ctypes, fcntl, os, socket, struct, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.prctl(1, 9, 0, 0, 0)  # SIGKILL when the evaluator goes
uid, gid = os.geteuid(), os.getegid()
if libc.unshare(0x10000000 | 0x40000000) != 0:
    print("unshare:", os.strerror(ctypes.get_errno()), flush=True)
    sys.exit(1)
if sys.argv[1:] != ["mapped-by-parent"]:
    maps = {"setgroups": "deny", "uid_map": f"{uid} {uid} 1", "gid_map": f"{gid} {gid} 1"}
    for name, text in maps.items():
        with open(f"/proc/self/{name}", "w") as f:
            f.write(text)
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
fcntl.ioctl(s, 0x8914, struct.pack("16sH22x", b"lo", 0x1 | 0x8 | 0x40))  # up, loopback, running
print("ready", flush=True)
sys.stdin.read()
"""


class NetworkJail:
    """A namespace holder process; processes launched through `executable` join it."""

    def __init__(self, holder: subprocess.Popen[str], executable: str) -> None:
        self.holder = holder
        self.executable = executable

    @classmethod
    def start(cls, folder: Path, identity: Identity | None = None) -> NetworkJail | None:
        """A jail, or None (with the reason logged) where the host does not allow one.

        With `identity`, the namespace maps that user only (root stays unmapped in it):
        the holder stays root outside, so bundle code can neither signal it nor gain
        anything in it, and the launcher switches to `identity` right after joining."""
        mode = ["mapped-by-parent"] if identity else []
        try:
            holder = subprocess.Popen(
                [sys.executable, "-I", "-c", _HOLDER, *mode],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                env=scrubbed(os.environ),
            )
        except OSError as exc:
            log.warning("no network namespace: %s", exc)
            return None
        assert holder.stdout is not None
        first = holder.stdout.readline().strip()
        if first != "ready":
            holder.kill()
            holder.wait()
            log.warning("no network namespace: %s", first or "the holder process failed")
            return None
        if identity is not None:
            # Only a process of the parent namespace holding CAP_SETUID there may map
            # another user than the namespace's creator: this one, not the holder.
            maps = {
                "setgroups": "deny",
                "uid_map": f"{identity.uid} {identity.uid} 1",
                "gid_map": f"{identity.gid} {identity.gid} 1",
            }
            for name, text in maps.items():
                Path(f"/proc/{holder.pid}/{name}").write_text(text)
        jail = cls(holder, str(launcher(folder, holder.pid, identity)))
        if not jail._works():
            jail.close()
            return None
        return jail

    def _works(self) -> bool:
        try:
            done = subprocess.run(
                [
                    self.executable,
                    "-c",
                    "import socket; socket.create_connection(('1.1.1.1', 53), 1)",
                ],
                capture_output=True,
                text=True,
                timeout=JAIL_START_TIMEOUT_S,
                check=False,
            )
        except (OSError, subprocess.SubprocessError) as exc:
            log.warning("no network namespace: the launcher cannot run: %s", exc)
            return False
        if "Network is unreachable" not in done.stderr:
            log.warning("no network namespace: the launcher said %r", done.stderr[-500:])
            return False
        return True

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.holder.kill()
        self.holder.wait()
        if self.holder.stdin:
            self.holder.stdin.close()
        if self.holder.stdout:
            self.holder.stdout.close()


def plain_launcher(folder: Path, identity: Identity | None = None) -> str | None:
    """The launcher without a jail (environment scrub, and the switch to `identity`), if
    this host can run it. Raises SandboxError where it cannot switch to `identity`."""
    path = launcher(folder, None, identity)
    try:
        done = subprocess.run(
            [str(path), "-c", "import os; print(sorted(os.environ))"],
            capture_output=True,
            text=True,
            timeout=JAIL_START_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        if identity is not None:
            raise SandboxError(f"the launcher cannot run: {exc}") from exc
        log.warning("bundle code starts with the worker's environment block: %s", exc)
        return None
    if done.returncode != 0:
        if identity is not None:
            raise SandboxError(f"the launcher failed as {identity.name}: {done.stderr[-500:]}")
        log.warning("bundle code starts with the worker's environment block: %s", done.stderr)
        return None
    return str(path)


def launcher(folder: Path, holder_pid: int | None, identity: Identity | None = None) -> Path:
    """An executable that starts Python (in the jail of `holder_pid`, if given, as
    `identity`, if given) with a scrubbed initial environment: multiprocessing's spawn
    runs it instead of Python."""
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = folder / (
        ("launch-jailed" if holder_pid else "launch") + ("-as-user" if identity else "")
    )
    join = str(holder_pid) if holder_pid else "-"
    ids = f"{identity.uid}:{identity.gid}" if identity else "-"
    path.write_text(
        f"#!/bin/sh\nexec '{sys.executable}' -I '{Path(__file__).resolve()}' exec {join} {ids} "
        f"'{sys.executable}' \"$@\"\n"
    )
    path.chmod(0o700)
    return path


@contextlib.contextmanager
def spawning_with(executable: str | None) -> Iterator[None]:
    """multiprocessing's spawn runs `executable` for the processes started inside."""
    if executable is None:
        yield
        return
    from multiprocessing import spawn

    before = spawn.get_executable()
    spawn.set_executable(executable)
    try:
        yield
    finally:
        spawn.set_executable(before)


def _fail(what: str) -> None:
    sys.stderr.write(f"pkb sandbox: {what}\n")
    sys.stderr.flush()
    os._exit(70)


def _exec_main(args: list[str]) -> None:
    """`sandbox.py exec HOLDER_PID|- UID:GID|- PYTHON ARGS...`: drop the supplementary
    groups, join the jail, switch to UID:GID, scrub, exec Python. Any failure ends here
    with exit code 70: bundle code never runs with more than was asked."""
    join, ids, python, rest = args[0], args[1], args[2], args[3:]
    uid, gid = (int(x) for x in ids.split(":")) if ids != "-" else (-1, -1)
    try:
        if ids != "-":
            # First, while still root in the initial namespace: the jail denies setgroups.
            os.setgroups([])
        if join != "-":
            lib = libc()
            fds = [os.open(f"/proc/{join}/ns/{ns}", os.O_RDONLY) for ns in ("user", "net")]
            for fd, kind in zip(fds, (_CLONE_NEWUSER, _CLONE_NEWNET), strict=True):
                if lib.setns(fd, kind) != 0:
                    _fail(f"setns: {os.strerror(ctypes.get_errno())}")
                os.close(fd)
        if ids != "-":
            # gid before uid: once the uid is dropped, the gid can no longer be changed.
            os.setgid(gid)
            os.setuid(uid)
    except OSError as exc:
        _fail(f"cannot switch to uid {uid}, gid {gid}: {exc}")
    if ids != "-" and (
        os.getresuid() != (uid, uid, uid) or os.getresgid() != (gid, gid, gid) or os.getgroups()
    ):
        _fail(f"still uid {os.getresuid()}, gid {os.getresgid()}, groups {os.getgroups()}")
    # After the switch, execve clears every capability (the uid is not root in the jail).
    fixed_layout()
    no_tracker(rest)
    os.execve(python, [python, *rest], scrubbed(os.environ))


if __name__ == "__main__" and sys.argv[1:2] == ["exec"]:
    _exec_main(sys.argv[2:])
