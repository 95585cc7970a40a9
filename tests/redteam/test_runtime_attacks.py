"""Hostile solutions on real rank processes over gloo (world size 2), on one worker.

One bundle carries every attack of `attacks.ATTACKS`, each followed by an honest solution
of another slug: the module-scoped evaluation shows each attack's result and that the same
worker still judges a correct solution right after it. A second evaluation on the same
process, of the repository's example bundle, shows the worker starts clean afterwards.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import os
import re
import tempfile
import zipfile
from pathlib import Path

import pytest

from evaluator.contract import ProblemResult, ProblemStatus, ResultFlag
from evaluator.host import cleanup
from evaluator.host.profiles import get_profile
from evaluator.host.rlimits import Limits
from evaluator.host.settings import load_settings
from evaluator.intake.bundle import read_bundle
from evaluator.judge.evaluate import evaluate_bundle
from evaluator.judge.rank_pool import RankPool
from problems.registry import all_problems
from tests.evaluator.archives import make_zip
from tests.evaluator.scratch import noted_pid_running, reachable_folder
from tests.redteam import attacks

# Every attack is judged once, in the module's fixture, inside its first test's time: about
# 350 s on a busy 2-core machine since calls are handed over one at a time.
pytestmark = pytest.mark.timeout(900)

TIMEOUT_S = 20
REPO = Path(__file__).resolve().parents[2]
LOG_CAP = 16 * 1024 * 1024
ALL_REDUCE = REPO / "problems" / "collective" / "all_reduce.py"
PLANTED = REPO / "problems" / "collective" / "pkb_redteam_planted.py"
AS_ROOT = pytest.mark.skipif(
    os.geteuid() != 0, reason="bundle code runs as the worker's own user when it is not root"
)


def settings_for(scratch_dir: Path):
    return dataclasses.replace(
        load_settings({"PKB_SEED_SECRET": "redteam-secret-0123456789"}),
        trials=1,
        warmup=2,
        iters=6,
        # Every timed call is checked, so a replay is caught whichever calls it hits (the
        # draw of checked calls is statistical: docs/security.md).
        timed_checks=6,
        # One pair of rounds: each attack is caught in its first candidate round, and the
        # module's ~90 problems stay within the suite's time limit on 2 shared cores
        # (tests/evaluator/test_runner.py covers the alternating rounds).
        rounds=1,
        problem_timeout_s=TIMEOUT_S,
        scratch_dir=scratch_dir,
        keep_scratch=True,
        limits=Limits(
            cpu_s=600,
            memory_bytes=4 * 1024**3,
            open_files=1024,
            tasks=256,
            file_bytes=LOG_CAP,
        ),
    )


@pytest.fixture(scope="module")
def worker_env():
    """The worker's environment holds secrets that bundle code must never see; its seed
    secret comes from a root-only file, as on a GPU host."""
    saved = dict(os.environ)
    folder, prefix = attacks.SECRET_PREFIX.rsplit("/", 1)
    os.makedirs(folder, exist_ok=True)
    fd, secret_file = tempfile.mkstemp(prefix=prefix, dir=folder)
    os.write(fd, attacks.CANARY.encode())
    os.close(fd)  # mkstemp made it 0600
    os.environ["PKB_SEED_SECRET_FILE"] = secret_file
    os.environ["REDIS_URL"] = f"redis://{attacks.CANARY}@127.0.0.1:6379/0"
    yield secret_file
    os.unlink(secret_file)
    os.environ.clear()
    os.environ.update(saved)


@pytest.fixture(scope="module")
def repository_hash():
    assert not PLANTED.exists()
    return hashlib.sha256(ALL_REDUCE.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def litter_before():
    return cleanup.litter_entries()


@pytest.fixture(scope="module")
def judge_pids():
    """Every trusted rank process started while the attacks run, and the forkserver they
    fork from (a spy on the pool's start)."""
    seen: list[int] = []
    original = RankPool.note_ready

    def note_ready(self, replies):
        original(self, replies)
        if self.kind in ("judge", "reference"):
            seen.extend(self.pids)
            seen.extend(pid for pid in [_forkserver_pid()] if pid)

    RankPool.note_ready = note_ready
    yield seen
    RankPool.note_ready = original


@pytest.fixture(scope="module")
def started_ticks() -> int:
    """When this module began: children the session started before (a browser driver,
    for one) are not the attacks' leftovers."""
    return cleanup.now_ticks()


@pytest.fixture(scope="module")
def evaluated(started_ticks, worker_env, litter_before, judge_pids, repository_hash):
    with reachable_folder("redteam") as scratch_dir:
        yield _evaluate_attacks(scratch_dir)


def _evaluate_attacks(scratch_dir: Path):
    """Every attack, in as many bundles as the member limit needs, one after the other on
    the same worker: (results by slug, the environment, each slug's scratch folder)."""
    results: dict[str, ProblemResult] = {}
    scratches: dict[str, Path] = {}
    for i, (files, slugs) in enumerate(attacks.bundle_chunks()):
        bundle = read_bundle(f"attacks-{i}.zip", make_zip(files), known_slugs=attacks.CATALOG)
        found, environment = evaluate_bundle(
            bundle,
            slugs=slugs,
            profile=dataclasses.replace(get_profile("cpu"), world_size=2),
            settings=settings_for(scratch_dir),
            evaluation_id=f"redteam-{i}",
            problems=attacks.CATALOG,
        )
        [scratch] = set(scratch_dir.glob("pkb-eval-*")) - set(scratches.values())
        results.update({r.slug: r for r in found})
        scratches.update(dict.fromkeys(slugs, scratch))
    return results, environment, scratches


def result(evaluated, name: str) -> ProblemResult:
    return evaluated[0][f"rt-{name}"]


def text(r: ProblemResult) -> str:
    return f"{r.message}\n{r.log}"


def test_no_attack_leaks_a_secret(evaluated):
    for r in evaluated[0].values():
        assert attacks.CANARY not in text(r), r.slug


@pytest.mark.parametrize("name", [s[3:] for s in attacks.bundle_files()[1] if "-after-" not in s])
def test_a_correct_solution_passes_right_after_the_attack(evaluated, name):
    after = evaluated[0][f"rt-after-{name}"]
    assert after.status == ProblemStatus.PASSED, text(after)
    assert not after.flags


@pytest.mark.parametrize("name", ["replay-count", "phase-by-tempo"])
def test_replaying_outputs_is_a_wrong_answer(evaluated, name):
    r = result(evaluated, name)
    assert r.status == ProblemStatus.WRONG_ANSWER, text(r)
    assert "a timed call" in r.message


def test_replaying_by_data_pointer_never_passes(evaluated):
    """Whether a fresh input lands at a pointer seen before is up to the allocator, so the
    attack replays in some runs and not in others. Either way it gains nothing: a replay
    returns the output of other data (a wrong answer), and without one it has computed
    every output honestly."""
    r = result(evaluated, "replay-pointer")
    if "pkb-redteam: replayed" in r.log:
        assert r.status == ProblemStatus.WRONG_ANSWER, text(r)
    else:
        assert r.status == ProblemStatus.PASSED, text(r)


@pytest.mark.parametrize(
    "name, replaced",
    [
        ("timer-perf-counter", "time.perf_counter"),
        ("timer-cuda-event", "Event.elapsed_time"),
        ("harness-patch", "_Runner.go"),
        ("detach-hook", "Tensor.copy_"),
    ],
)
def test_patching_the_clock_or_the_runner_is_flagged(evaluated, name, replaced):
    """Nothing in the runner decides a number any more: the result is measured and
    checked as any other (right outputs: passed), and flagged for the patch."""
    r = result(evaluated, name)
    assert r.flags == [str(ResultFlag.TAMPERED)], text(r)
    assert replaced in r.message
    assert r.status == ProblemStatus.PASSED


def test_reading_frames_and_objects_finds_no_checked_call(evaluated):
    r = result(evaluated, "frame-reader")
    assert r.status == ProblemStatus.WRONG_ANSWER, text(r)
    assert "pkb-redteam: checked calls found: None" in r.log


def test_no_seed_is_found_to_make_a_peers_input(evaluated):
    """The issue's 14x: every rank's input regenerated from the trial seed, no
    communication. The candidate's process holds no seed to find."""
    r = result(evaluated, "seed-search")
    assert r.status == ProblemStatus.WRONG_ANSWER, text(r)
    assert "FOUND the seed" not in r.log and "none made my input" in r.log


def test_hooking_input_generation_runs_nothing(evaluated):
    """The issue's 520x: work done while the harness made the inputs. No input is made
    in the candidate's process, so the hook never runs and no answer is stashed."""
    r = result(evaluated, "input-hook")
    assert r.status == ProblemStatus.WRONG_ANSWER, text(r)
    assert "input hook ran" not in r.log and "no stashed answer" in r.log


def test_writing_into_its_inputs_reaches_neither_the_reference_nor_a_later_call(evaluated):
    """Issue 22: input mutation by the candidate must not leak into the judge's reference
    or later calls. Its answers are right, so it passes, and no zeroed input ever came
    back to it (its cheap path never ran)."""
    r = result(evaluated, "input-scribble")
    assert r.status == ProblemStatus.PASSED, text(r)
    assert "a zeroed input came back" not in text(r)


@pytest.mark.parametrize(
    "name, returned",
    [
        ("lazy-output", "returned a Lazy"),
        ("zero-stride", "returned float32(17179869184,) where the reference returns float32(256,)"),
        ("sparse-output", "returned a Tensor where the reference returns float32(256,)"),
        ("meta-output", "returned a Tensor where the reference returns float32(256,)"),
        ("oversized-output", "returned float32(1048832,)"),
    ],
)
def test_an_output_that_is_not_the_references_shape_is_a_wrong_answer(evaluated, name, returned):
    r = result(evaluated, name)
    assert r.status == ProblemStatus.WRONG_ANSWER, text(r)
    assert returned in r.message, text(r)


def test_a_reply_forged_on_the_judges_pipe_never_passes(evaluated):
    """Whether the judge reads the rooms before the runner filled them (a wrong answer)
    or after (the real reply then comes out of turn: tampered) is a race; either way the
    attack fails, and its runner is replaced before the next problem."""
    r = result(evaluated, "forged-reply")
    assert "pkb-redteam: forged the round's reply" in r.log
    assert r.status in (ProblemStatus.WRONG_ANSWER, ProblemStatus.RUNTIME_ERROR), text(r)
    if r.status == ProblemStatus.RUNTIME_ERROR:
        assert r.flags == [str(ResultFlag.TAMPERED)], text(r)


def test_garbage_on_the_judges_pipe_is_flagged(evaluated):
    r = result(evaluated, "pipe-garbage")
    assert r.status == ProblemStatus.RUNTIME_ERROR, text(r)
    assert r.flags == [str(ResultFlag.TAMPERED)], text(r)
    assert "oversized reply" in r.message and "the harness's pipe" in r.message


def test_patching_torch_comparisons_changes_nothing_in_the_judge(evaluated):
    r = result(evaluated, "patch-comparison")
    assert r.status == ProblemStatus.WRONG_ANSWER, text(r)


def test_the_environment_holds_no_secret(evaluated):
    r = result(evaluated, "environment")
    assert r.status == ProblemStatus.RUNTIME_ERROR
    assert "environment probe done; found []" in r.message, text(r)


def test_no_process_environment_is_readable_with_a_secret(evaluated):
    r = result(evaluated, "proc-environ")
    assert r.status == ProblemStatus.RUNTIME_ERROR
    assert "environ scan done; found []" in r.message, text(r)


def test_judge_memory_is_not_readable(evaluated, judge_pids):
    r = result(evaluated, "judge-memory")
    assert r.status == ProblemStatus.RUNTIME_ERROR
    assert "memory probe done" in r.message, text(r)
    read = [int(p) for p in re.findall(r"\d+", r.message.split("processes:")[1])]
    if evaluated[1]["sandbox"] == "bubblewrap":
        # Its pid namespace holds bwrap's init and holder and the candidate's own ranks:
        # no judge to read (pids there are the namespace's, not comparable to the host's).
        assert len(read) <= 2 + 2 * 2, read
        return
    assert judge_pids and not set(read) & set(judge_pids)


def test_bundle_code_has_no_network(evaluated):
    assert evaluated[1]["network_isolated"] is True
    r = result(evaluated, "socket")
    assert r.status == ProblemStatus.RUNTIME_ERROR
    assert "network probe done" in r.message and "CONNECTED" not in r.message, text(r)


def test_a_fork_bomb_hits_the_task_limit(evaluated):
    # Bundle code is never root (the kernel exempts uid 0 from RLIMIT_NPROC): the bomb is
    # refused well before the deadline, and no child survives (the sweep after the
    # example checks that).
    r = result(evaluated, "fork-bomb")
    assert r.status == ProblemStatus.RUNTIME_ERROR, text(r)
    assert "fork refused after" in r.message
    assert int(r.message.split("fork refused after ")[1].split()[0]) <= 256


@AS_ROOT
def test_bundle_code_cannot_write_into_the_repository(evaluated, repository_hash):
    r = result(evaluated, "write-repository")
    assert r.status == ProblemStatus.RUNTIME_ERROR, text(r)
    assert "all_reduce.py: PermissionError" in r.message, text(r)
    # Refused by the file's permissions, or first by the sandbox's read-only host files.
    assert re.search(r"pkb_redteam_planted.py: (PermissionError|OSError)", r.message), text(r)
    assert hashlib.sha256(ALL_REDUCE.read_bytes()).hexdigest() == repository_hash
    assert not PLANTED.exists()


@AS_ROOT
def test_a_root_only_secret_file_is_not_readable(evaluated, worker_env):
    r = result(evaluated, "read-secret-file")
    assert r.status == ProblemStatus.RUNTIME_ERROR, text(r)
    assert "secret probe done" in r.message and "READ" not in r.message, text(r)
    # Not shown at all (the allowlisted sandbox leaves the repository's var/ out), or
    # shown and refused by its permissions (a weaker sandbox): never read.
    assert "secret probe done: []" in r.message or "PermissionError" in r.message, text(r)


@AS_ROOT
def test_bundle_code_cannot_kill_the_worker_or_the_judges(evaluated, judge_pids):
    r = result(evaluated, "kill-worker")
    assert r.status == ProblemStatus.RUNTIME_ERROR, text(r)
    assert "kill probe done; killed []" in r.message, text(r)
    if evaluated[1]["sandbox"] == "bubblewrap":  # its own pid namespace: none of them in view
        assert "no process outside in sight" in r.message, text(r)
        return
    refused = int(r.message.split("refused ")[1].split(")")[0].split()[0])
    assert refused >= 2 + 2  # the worker, pid 1, the two judges (and the jail's holder)
    assert evaluated[1]["candidate_user"] == "nobody"


def test_memory_exhaustion_is_a_runtime_error(evaluated):
    r = result(evaluated, "memory")
    assert r.status == ProblemStatus.RUNTIME_ERROR, text(r)
    assert "MemoryError" in r.message


def test_a_log_flood_stops_at_the_file_size_limit(evaluated):
    r = result(evaluated, "log-flood")
    assert r.status == ProblemStatus.RUNTIME_ERROR, text(r)
    scratch = evaluated[2]["rt-log-flood"]
    sizes = {p.name: p.stat().st_size for p in (scratch / "logs").iterdir()}
    assert not {name: size for name, size in sizes.items() if size > LOG_CAP}
    assert len(r.to_json()["log"]) <= 17 * 1024


def test_never_returning_times_out(evaluated):
    r = result(evaluated, "never-returns")
    assert r.status == ProblemStatus.TIMEOUT, text(r)


def test_exiting_is_a_runtime_error(evaluated):
    r = result(evaluated, "exits")
    assert r.status == ProblemStatus.RUNTIME_ERROR, text(r)
    assert "exited with code 0" in r.message


def test_a_detached_daemon_is_killed(evaluated):
    r = result(evaluated, "detached-process")
    assert r.status in (ProblemStatus.RUNTIME_ERROR, ProblemStatus.TIMEOUT), text(r)
    noted = evaluated[2]["rt-detached-process"] / "tmp" / "daemon-pids"
    if not noted.exists():
        # The allowlisted sandbox gives bundle code a private tmpfs there: the pids it
        # noted went with it. (To do: note them in a folder the sandbox shares.)
        pytest.skip("the sandbox's tmp folder is private: the daemons' pids are not readable")
    daemons = [int(p) for p in noted.read_text().split()]
    assert len(daemons) == 2  # one per rank
    assert [pid for pid in daemons if noted_pid_running(pid)] == []


def test_files_left_in_shared_folders_are_removed(evaluated, litter_before):
    r = result(evaluated, "litter")
    assert r.status == ProblemStatus.RUNTIME_ERROR, text(r)
    assert "/dev/shm/pkb-redteam-" in r.message  # it did leave files
    if os.geteuid() == 0:  # bundle code as the candidate user: /tmp and the like too
        assert "/tmp/pkb-redteam-" in r.message and "/var/tmp/pkb-redteam-" in r.message
        folders = cleanup.LITTER_DIRS
    else:  # as the worker's own user only /dev/shm: the worker's /tmp files are its own
        folders = (cleanup.SHM_DIR,)
    after = cleanup.litter_entries(folders)
    left = [f"{d}/{n}" for d in after for n in after[d] - litter_before.get(d, set())]
    assert not [path for path in left if "pkb-redteam-" in path], left


def test_the_example_bundle_passes_on_the_same_worker_afterwards(evaluated, started_ticks):
    """The worker starts clean after all of the above: the repository's example passes."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as archive:
        archive.write(REPO / "examples" / "pytorch" / "all-reduce.py", "all-reduce.py")
    catalog = {p.slug: p for p in all_problems()}
    bundle = read_bundle("example.zip", buf.getvalue(), known_slugs=catalog)
    with reachable_folder("redteam-after") as scratch_dir:
        results, environment = evaluate_bundle(
            bundle,
            slugs=["all-reduce"],
            profile=dataclasses.replace(get_profile("cpu"), world_size=2),
            settings=settings_for(scratch_dir),
            evaluation_id="redteam-after",
        )
    assert results[0].status == ProblemStatus.PASSED, text(results[0])
    assert not results[0].flags
    assert cleanup.reap_orphans(since_ticks=started_ticks, keep=_ours()) == []


def _ours() -> set[int]:
    """Children this test process has for reasons of its own (resource tracker...)."""
    import multiprocessing
    from multiprocessing import resource_tracker

    pids = {p.pid for p in multiprocessing.active_children()}
    tracker = getattr(resource_tracker._resource_tracker, "_pid", None)
    return pids | {pid for pid in (tracker, _forkserver_pid()) if pid}


def _forkserver_pid() -> int | None:
    from multiprocessing import forkserver

    return getattr(forkserver._forkserver, "_forkserver_pid", None)
