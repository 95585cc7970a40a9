"""Telling the pair's order from signals around the other side's turn (issue 39; gloo,
world size 2, judged with real rank processes).

Until 2026-11-29 each judge stopped its candidate's process group (SIGSTOP) for the
reference's side of every pair and continued it (SIGCONT) after: a SIGSTOP cannot be
caught, but the SIGCONT can, and a red team counted continues to tell a candidate-first
side from a reference-first one. Now a judge freezes the candidate's rank (its cgroup)
and thaws it, and sends nothing (judge/processes.py, `frozen`); where the host gives no
freezer nothing replaces it: neither runner stands still, and the evaluation's
environment says so (`candidate_frozen: false`).

The hostile bundle catches every job-control and common signal and notes each one. Its
answer depends on what it caught: from the first signal on it believes it knows where
it stands and answers without adding its peer's part (fast, and wrong), so it passes
only if nothing ever reached it, over pairs in both orders. It proves its handlers work
inside the sandbox by raising one signal on itself at its first call, noted apart."""

from __future__ import annotations

from pathlib import Path

import pytest

from evaluator.contract import ProblemStatus
from evaluator.host import cgroups
from tests.evaluator.judging import judge_files_and_environment, small_settings
from tests.evaluator.scratch import freezes_here, reachable_folder
from tests.redteam import attacks

CATCHING = """
import os, signal
import torch
import torch.distributed as dist

CAUGHT = []
CALLS = [0]
LISTENED = [
    signal.SIGCONT, signal.SIGTSTP, signal.SIGTTIN, signal.SIGTTOU, signal.SIGHUP,
    signal.SIGINT, signal.SIGTERM, signal.SIGUSR1, signal.SIGALRM, signal.SIGWINCH,
    signal.SIGURG,
]


def _note(name, line):
    with open(os.path.join({notes!r}, f"{{name}}.{{dist.get_rank()}}"), "a") as notes:
        notes.write(line + "\\n")


def _caught(number, frame):
    CAUGHT.append(number)
    _note("caught", f"{{signal.Signals(number).name}} before call {{CALLS[0] + 1}}")


def _self_test(number, frame):
    _note("self-test", "SIGUSR2 caught")


for listened in LISTENED:
    signal.signal(listened, _caught)
signal.signal(signal.SIGUSR2, _self_test)


def solution(x):
    CALLS[0] += 1
    if CALLS[0] == 1:
        os.kill(os.getpid(), signal.SIGUSR2)  # its handlers run here, in the sandbox
    out = x.clone()
    dist.all_reduce(torch.zeros(1) if CAUGHT else out)  # the ranks stay in step
    return out
"""

FILES = {"ts-catching.py": None, "ts-after.py": attacks.HONEST}


def _judged(name: str) -> tuple[dict, dict, Path]:
    """Each file's result, the environment, and the notes the bundle left, per rank."""
    with reachable_folder(name) as notes:
        # Root's, writable by all: a folder of the candidate user's in /tmp is litter to
        # any evaluation that began before it was made (cleanup.remove_litter), another
        # test's on the same machine included, which removed it mid-run.
        notes.chmod(0o1777)
        files = {**FILES, "ts-catching.py": CATCHING.format(notes=str(notes))}
        catalog = {path[:-3]: attacks.problem(path[:-3]) for path in files}
        settings = small_settings(
            "turn-signals-secret-0123456789",
            warmup=2,
            iters=12,
            rounds=4,  # two pairs of each order, after the settling pair
            timed_checks=12,  # every timed call is checked
            problem_timeout_s=60,
            sandbox_shared=(notes,),
        )
        results, environment = judge_files_and_environment(files, catalog, settings, name)
        found = {path.name: path.read_text() for path in notes.iterdir()}
    return results, environment, found


def _assert_nothing_caught(results: dict, found: dict) -> None:
    caught = {name: text for name, text in found.items() if name.startswith("caught.")}
    assert not caught, f"the candidate caught signals around the reference's side: {caught}"
    assert found.get("self-test.0") == found.get("self-test.1") == "SIGUSR2 caught\n", found
    result = results["ts-catching"]
    assert result.status == ProblemStatus.PASSED, (result.status, result.message)
    orders = {r["first"] for case in result.cases for r in case.rounds}
    assert orders == {"reference", "candidate"}, orders
    after = results["ts-after"]
    assert after.status == ProblemStatus.PASSED and not after.flags, after.message


def test_a_frozen_candidate_catches_no_signal_in_either_order():
    if not freezes_here():
        pytest.skip("this host gives no freezer (root, and cgroup v1's freezer or v2)")
    results, environment, found = _judged("turn-signals-frozen")
    assert environment["candidate_frozen"] is True
    _assert_nothing_caught(results, found)


def test_without_a_freezer_no_signal_replaces_it(monkeypatch, tmp_path):
    """A host whose cgroup file system holds nothing: no memory cap and no freezer, as on
    a development machine; the candidate is not stopped at all, and the environment
    says so for the portal to show."""
    monkeypatch.setattr(cgroups, "ROOT", tmp_path)
    results, environment, found = _judged("turn-signals-unfrozen")
    assert environment["candidate_frozen"] is False
    _assert_nothing_caught(results, found)
