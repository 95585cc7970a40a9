"""What a judge does to processes around its clock: a runner's process group stopped while
the other runner is timed, every thread of it stopped before the first round starts and
none left stopped once it is continued (evaluator/judge/processes.py), and its own garbage
collector paused for a pair."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from evaluator.judge.processes import settle, stopped, thread_states

# A process of five threads that never sleep for long: the main one spins, four wake every
# millisecond, as a runner's CUDA and NCCL threads wake on their own.
BUSY = """
import threading, time
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


def test_inside_stopped_every_thread_has_stopped_and_after_it_none_has(busy):
    with stopped(busy.pid):
        states = thread_states(busy.pid)
        assert states is not None and len(states) == 5
        assert set(states) == {"T"}
    # Continued, and waited for: no thread of it is left to wake inside the next rounds.
    states = thread_states(busy.pid)
    assert states is not None and len(states) == 5
    assert "T" not in states


def test_settle_gives_up_on_a_process_that_does_not_stop(busy):
    """No signal sent: it waits out its timeout and says so, and the judge goes on."""
    began = time.monotonic()
    assert settle(busy.pid, timeout_s=0.02) is False
    assert time.monotonic() - began < 1


def test_thread_states_read_a_command_with_spaces_and_parentheses(tmp_path):
    task = tmp_path / "42" / "task" / "42"
    task.mkdir(parents=True)
    (task / "stat").write_text("42 (a (b) c) T 1 42 42 0 -1\n")
    assert thread_states(42, proc=str(tmp_path)) == ["T"]
    assert thread_states(43, proc=str(tmp_path)) is None  # gone


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
