"""Both runners come to their rounds alike, through real evaluations over gloo:

- each stands still while the other's rounds run (judge/turns.py: `reference_side`,
  `candidate_side`): the candidate's runner was already stopped while the reference's
  rounds ran; the reference's now is while the candidate's run (with only the candidate
  stopped, it paid up to 4% more than the reference for going second, on an H100);
- each side ends with its runner's echo round (judge/rank.py: the tare ends the
  reference's side, `reference_rounds`; an untimed echo the candidate's, `echo_last`):
  whichever side goes first in a pair follows its own runner's work of the pair before,
  and whichever goes second follows the other's echo round;
- Python's cyclic collector is off in either runner while a round runs
  (candidate/runner.py);
- a runner exec'd by a launcher starts without address-space randomisation
  (host/sandbox.py: `fixed_layout`; the reference's box: test_reference_box.py)."""

from __future__ import annotations

import dataclasses
import functools
import struct
import threading
import time
from pathlib import Path

import torch

from evaluator.candidate import runner
from evaluator.contract import ProblemStatus
from problems.collective import all_reduce
from tests.evaluator.judging import judge_files, sleeping_solution, small_settings
from tests.evaluator.scratch import reachable_folder
from tests.redteam import attacks

TICK_S = 0.0005
SLEEP_S = 0.05  # each of the candidate's calls: long enough to show as a gap in the ticks
CALLS = 3  # per round
PAIRS = 2

_ticker: list[threading.Thread] = []


def _tick(path: str) -> None:
    with open(path, "ab", buffering=0) as f:
        while True:
            f.write(struct.pack("d", time.monotonic()))
            time.sleep(TICK_S)


def ticking_reference(x: torch.Tensor, *, path: str) -> torch.Tensor:
    """The all-reduce reference, with a thread of the reference's runner writing the time
    every half millisecond from its first call on: wherever it stood still, a gap."""
    if not _ticker:
        mine = f"{path}.{torch.distributed.get_rank()}"
        _ticker.append(threading.Thread(target=_tick, args=(mine,), daemon=True))
        _ticker[0].start()
    return all_reduce.solution(x)


SLEEPER = sleeping_solution(SLEEP_S)


# The persona through personality(2), not /proc/self/personality: a rank is not dumpable,
# so its own /proc files are root's and that one (0400) is not its to read.
LAYOUT = """
import ctypes
import torch.distributed as dist

ADDR_NO_RANDOMIZE = 0x0040000
FIXED = ctypes.CDLL(None).personality(0xFFFFFFFF) & ADDR_NO_RANDOMIZE


def solution(x):
    out = x.clone()
    dist.all_reduce(out)
    return out if FIXED else out + 1  # a wrong answer where the layout is random
"""


COLLECTOR = """
import gc
import torch.distributed as dist


def solution(x):
    out = x.clone()
    dist.all_reduce(out)
    return out + 1 if gc.isenabled() else out  # a wrong answer where the collector runs
"""


def _gaps(path: Path) -> list[float]:
    data = path.read_bytes()
    ticks = [t for (t,) in struct.iter_unpack("d", data[: len(data) // 8 * 8])]
    return [b - a for a, b in zip(ticks, ticks[1:], strict=False)]


def test_the_references_runner_stands_still_while_the_candidates_rounds_run(tmp_path):
    ticks = tmp_path / "ticks"
    reference = functools.partial(ticking_reference, path=str(ticks))
    catalog = {"turns": dataclasses.replace(attacks.problem("turns"), reference=reference)}
    settings = small_settings(
        "turns-secret-0123456789",
        warmup=CALLS,
        iters=CALLS * PAIRS,
        rounds=PAIRS,
        problem_timeout_s=120,
    )
    result = judge_files({"turns.py": SLEEPER}, catalog, settings, "turns")["turns"]
    assert result.status == ProblemStatus.PASSED, result.message
    # A candidate's side (its warm-up round and its timed round, each of CALLS calls that
    # sleep) is a stretch of at least 2 * CALLS * SLEEP_S in which no tick was written:
    # one per timed pair, each case. Running, the ticker never pauses that long, even on
    # two busy cores.
    side = 2 * CALLS * SLEEP_S
    for rank in range(2):
        gaps = _gaps(tmp_path / f"ticks.{rank}")
        stood_still = [gap for gap in gaps if gap >= 0.9 * side]
        assert len(stood_still) >= PAIRS * len(result.cases), (rank, len(stood_still), max(gaps))


def noting_reference(x: torch.Tensor, *, folder: str) -> torch.Tensor:
    """The all-reduce reference, noting when each of its calls, and each call of a tare
    round in its runner, begins: the test's own hook on the reference's (trusted) runner."""
    rank = torch.distributed.get_rank()
    if not getattr(runner._echo, "noted", False):
        echo = runner._echo

        def noted_echo(base: torch.Tensor, slots: list) -> object:
            call = echo(base, slots)

            def note_then_call(**kwargs: object) -> object:
                _note(f"{folder}/tare.{rank}")
                return call(**kwargs)

            return note_then_call

        noted_echo.noted = True  # type: ignore[attr-defined]
        runner._echo = noted_echo
    _note(f"{folder}/reference.{rank}")
    return all_reduce.solution(x)


def _note(path: str) -> None:
    with open(path, "ab") as f:
        f.write(struct.pack("d", time.monotonic()))


NOTING = """
import struct, time
import torch.distributed as dist
from evaluator.candidate import runner


def _note(kind):
    with open(f"{folder}/{{kind}}.{{dist.get_rank()}}", "ab") as f:
        f.write(struct.pack("d", time.monotonic()))


_echo = runner._echo


def _noted_echo(base, slots):
    call = _echo(base, slots)

    def note_then_call(**kwargs):
        _note("candidate-echo")
        return call(**kwargs)

    return note_then_call


runner._echo = _noted_echo


def solution(x):
    _note("candidate")
    out = x.clone()
    dist.all_reduce(out)
    return out
"""
KINDS = ("reference", "tare", "candidate", "candidate-echo")


def _who_ran(folder: Path, rank: int) -> list[str]:
    """Which runner's calls came in turn on `rank`, in order: runs of each of KINDS,
    each run of one kind's calls once."""
    notes = []
    for kind in KINDS:
        path = folder / f"{kind}.{rank}"
        data = path.read_bytes() if path.exists() else b""
        notes += [(t, kind) for (t,) in struct.iter_unpack("d", data)]
    turns: list[str] = []
    for _, kind in sorted(notes):
        if not turns or turns[-1] != kind:
            turns.append(kind)
    return turns


def test_each_side_ends_with_its_runners_echo_so_either_side_second_follows_an_echo():
    reference_first_pairs = 2
    with reachable_folder("tare-notes", candidates_write=True) as notes:
        reference = functools.partial(noting_reference, folder=str(notes))
        catalog = {"tare": dataclasses.replace(attacks.problem("tare"), reference=reference)}
        settings = small_settings(
            "tare-secret-0123456789",
            warmup=1,
            iters=2 * 2 * reference_first_pairs,
            rounds=2 * reference_first_pairs,
            sandbox_shared=(notes,),
        )
        files = {"tare.py": NOTING.format(folder=str(notes))}
        result = judge_files(files, catalog, settings, "tare")["tare"]
        turns = [_who_ran(notes, rank) for rank in range(2)]
    assert result.status == ProblemStatus.PASSED, result.message
    for rank_turns in turns:
        tares = [i for i, kind in enumerate(rank_turns) if kind == "tare"]
        echoes = [i for i, kind in enumerate(rank_turns) if kind == "candidate-echo"]
        # A tare in every timed pair of every case, each right after the reference's
        # rounds, never after the candidate's (as it came in reference-first pairs when
        # it ran after both sides: there the reference went first after its own tare,
        # the candidate always after the reference's runner).
        assert len(tares) >= 2 * reference_first_pairs * len(result.cases), rank_turns
        assert all(rank_turns[i - 1] == "reference" for i in tares), rank_turns
        # And an echo of the candidate's runner in every timed pair, in either order,
        # right after the candidate's rounds: the reference, second, follows it as the
        # candidate, second, follows the tare.
        assert len(echoes) == len(tares), rank_turns
        assert all(rank_turns[i - 1] == "candidate" for i in echoes), rank_turns
        after = [rank_turns[i + 1] for i in echoes if i + 1 < len(rank_turns)]
        assert "candidate" in after, rank_turns  # a candidate-first pair, echo included


def test_the_candidates_runner_starts_without_address_space_randomisation():
    catalog = {"layout": attacks.problem("layout")}
    settings = small_settings("layout-secret-0123456789", warmup=1, iters=2, rounds=1)
    result = judge_files({"layout.py": LAYOUT}, catalog, settings, "layout")["layout"]
    assert result.status == ProblemStatus.PASSED, result.message


def test_the_runners_collector_is_off_while_a_round_runs():
    catalog = {"collector": attacks.problem("collector")}
    settings = small_settings("collector-secret-0123456789", warmup=1, iters=4, rounds=2)
    result = judge_files({"collector.py": COLLECTOR}, catalog, settings, "collector")
    assert result["collector"].status == ProblemStatus.PASSED, result["collector"].message
