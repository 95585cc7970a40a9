"""What a judge does to processes around its clock: a runner's rank frozen while the other
runner is timed, every task of it frozen before the first round starts and thawed after,
with no signal its handlers could count (evaluator/judge/processes.py), and its own
garbage collector paused for a pair."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from evaluator.judge.processes import frozen
from tests.evaluator.scratch import host_freezers

# A process of five threads that never sleep for long: the main one spins, four wake every
# millisecond, as a runner's CUDA and NCCL threads wake on their own. It counts every
# job-control signal it catches, and prints the count when asked (SIGUSR1).
BUSY = """
import signal, threading, time
caught = []
for sig in (signal.SIGCONT, signal.SIGTSTP, signal.SIGTTIN, signal.SIGTTOU):
    signal.signal(sig, lambda number, frame: caught.append(number))
signal.signal(signal.SIGUSR1, lambda number, frame: print(len(caught), flush=True))
def tick():
    while True:
        time.sleep(0.001)
for _ in range(4):
    threading.Thread(target=tick, daemon=True).start()
print("ready", flush=True)
while True:
    pass
"""


@pytest.fixture
def busy():
    proc = subprocess.Popen(
        [sys.executable, "-c", BUSY], stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    yield proc
    proc.kill()
    proc.wait()


@pytest.fixture
def freezers():
    """A freezer per runner of one rank, on this machine's own hierarchy."""
    with host_freezers(f"pkb-test-{os.getpid()}") as made:
        if made is None:
            pytest.skip("this host gives no freezer (root, and cgroup v1's freezer or v2)")
        yield made


def _states(pid: int) -> list[str]:
    found = []
    for stat in Path(f"/proc/{pid}/task").glob("*/stat"):
        text = stat.read_text()
        found.append(text[text.rfind(")") + 2])
    return found


def _caught(proc: subprocess.Popen[str]) -> int:
    """How many job-control signals the process caught: it answers only when it runs."""
    proc.send_signal(signal.SIGUSR1)
    assert proc.stdout is not None
    return int(proc.stdout.readline())


def _is_frozen(path: Path) -> bool:
    if (path / "freezer.state").exists():
        return (path / "freezer.state").read_text().strip() == "FROZEN"
    return "frozen 1" in (path / "cgroup.events").read_text().splitlines()


def test_inside_frozen_the_rank_is_frozen_and_after_it_runs_with_no_signal_caught(busy, freezers):
    freezers.add("candidate", 0, [busy.pid])  # as the pool moves a runner's rank in
    freezer = freezers.paths["candidate"][0]
    for _ in range(3):  # a pair's worth of turns, and more
        with frozen(str(freezer)):
            assert _is_frozen(freezer)
            # Parked by the freezer, not stopped by a signal ("T").
            assert "T" not in _states(busy.pid) and len(_states(busy.pid)) == 5
        assert not _is_frozen(freezer)
    assert _caught(busy) == 0


def test_without_a_freezer_nothing_is_sent(busy):
    """A host without a freezer: neither runner stands still, and nothing reaches it
    that a handler could count (docs/security.md)."""
    with frozen(None):
        assert "T" not in _states(busy.pid)
    assert _caught(busy) == 0


def test_a_judge_pauses_its_garbage_collector_for_a_pair_only():
    """No collection inside a judge's clock: the collector is off while a pair runs, and as
    it was after (on, or off where something else had turned it off)."""
    import gc

    from evaluator.judge.rank import collector_paused

    assert gc.isenabled()
    with collector_paused():
        assert not gc.isenabled()
    assert gc.isenabled()
    gc.disable()
    try:
        with collector_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()
