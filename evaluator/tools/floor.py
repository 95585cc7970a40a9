"""The harness's floor, and same code judged against itself (numbers to read, not tests).

    python -m evaluator.tools.floor --out DIR [--calls 10,50] [--repeats 3] [--max-repeats 9]
                                          [--sizes 65536,1048576] [--cpu]
    python -m evaluator.tools.floor --calibrate --out DIR [--profile h200x2] [--rounds 20]
                                          [--max-rounds 200] [--sizes 16777216]

FLOOR (one process per GPU, started here; `--cpu`: two gloo ranks). The all-reduce
problem's reference at 64K, 1M and 16M bf16 elements (1K and 16K float32 on CPU; `--sizes`
picks others), and an empty solution that only copies its input into a preallocated output:
  - events:    back-to-back calls on one input between two CUDA events, in processes of
               the floor's own (the independent measurement, as nccl-tests times a
               collective), on the core the evaluator gives the rank's runners
               (`floor_events.py`): takes of every line in bursts of a round's length,
               before and after each of the evaluator's passes (--repeats), and one burst
               of a line right after each of the evaluator's pairs of it ("beside");
  - fresh:     the same over a batch of fresh inputs;
  - evaluator: the whole evaluator (`judge.evaluate.evaluate_bundle`): per pair, the
               per-call time of the candidate's round, on the judge's clock (from before
               it writes a round's inputs to after it has read the outputs it checks), at
               each --calls per round, net of the harness: less the same round around calls
               that return at once (what the input copy, the messages and the output
               copies cost alone). A line's gap is the median over its pairs of that time
               less the burst beside it, with the median's 95% interval (`floor_report`).
Writes floor.json and floor.md.

CALIBRATE (any profile, CPU included; `evaluator/tools/calibrate.py`). Judges a bundle
whose solution IS the all-reduce reference through the whole evaluator: both sides run the
same code, so every pair of rounds should read 1.00x. Writes clock.json and clock.md: per
case, the median pair speedup, its interval, the pairs it took and the range of the pairs.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import uuid
from pathlib import Path
from typing import Any

import torch

from evaluator.host.profiles import HardwareProfile
from evaluator.host.settings import load_settings
from evaluator.judge.canary import REFERENCE_SOURCE, all_reduce_problem, bundle_of
from evaluator.judge.evaluate import evaluate_bundle
from evaluator.judge.stats import median_interval
from evaluator.rank_process import NO_MULTICAST
from evaluator.tools.calibrate import calibrate, clock_markdown
from evaluator.tools.floor_events import (
    BURST_GAP_S,
    SOLUTIONS,
    WARMUP,
    EventsBeside,
    Line,
    sizes_of,
)
from evaluator.tools.floor_events import events_lines as _events_lines
from evaluator.tools.floor_report import GAP_CONFIDENCE, decided, floor_markdown
from problems.collective import all_reduce

CALLS = (10,)  # timed calls per round: the evaluator's nccl default (100 iters, 10 rounds)

COPY_SOURCE = """
import torch

OUT = {}

def solution(x):
    out = OUT.get((x.shape, x.dtype, x.device))
    if out is None:
        out = OUT[(x.shape, x.dtype, x.device)] = torch.empty_like(x)
    out.copy_(x)
    return out
"""


def copy_reference(x: torch.Tensor) -> torch.Tensor:
    return x.clone()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m evaluator.tools.floor",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--out", type=Path, required=True, help="folder for the JSON and md")
    parser.add_argument("--calibrate", action="store_true", help="same code on both sides")
    parser.add_argument("--profile", default=None, help="--calibrate: default PKB_PROFILE")
    parser.add_argument("--world-size", type=int, default=None)
    parser.add_argument(
        "--rounds",
        type=int,
        default=None,
        help="pairs of rounds per case, at least "
        "(floor: 10; --calibrate: the profile's, adding pairs as the evaluator does)",
    )
    parser.add_argument("--max-rounds", type=int, default=None, help="--calibrate: at most")
    parser.add_argument("--iters", type=int, default=50, help="calls of an events burst")
    parser.add_argument("--bursts", type=int, default=20, help="bursts of an events line")
    parser.add_argument("--calls", default=",".join(map(str, CALLS)), help="calls per round")
    parser.add_argument(
        "--repeats", type=int, default=3, help="evaluator passes, each between takes of events"
    )
    parser.add_argument(
        "--max-repeats",
        type=int,
        default=None,
        help="passes at most: more are added while a line is within noise of the goal",
    )
    parser.add_argument(
        "--sizes", default="", help="elements per case, comma-separated (default: the table's)"
    )
    parser.add_argument("--cpu", action="store_true", help="the floor over gloo, to try it")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    os.environ.update(NO_MULTICAST)
    if args.calibrate:
        report = calibrate(args, sizes_of(args, cpu=False), sizes_of(args, cpu=True))
        _write(args.out, "clock", report, clock_markdown(report))
        return 0
    report = floor(args)
    _write(args.out, "floor", report, floor_markdown(report))
    return 0


def _write(folder: Path, name: str, report: dict[str, Any], markdown: str) -> None:
    (folder / f"{name}.json").write_text(json.dumps(report, indent=2, default=str))
    (folder / f"{name}.md").write_text(markdown)
    print(markdown)


# --- the floor ------------------------------------------------------------------------------


def floor(args: argparse.Namespace) -> dict[str, Any]:
    """The floor table; `--cpu` runs it over gloo, to try the command without GPUs.

    Events, then the evaluator, then events again, `--repeats` times. Each of a pass's
    pairs is held against a burst of the same line taken right after it
    (`floor_events.EventsBeside`): a line's gap is the median over every pair of every
    pass, with its interval. The takes around the passes stay in the table for scale (a
    host's speed moves by tens of percent between minutes, and the gap held against them
    as well). Up to `--max-repeats`, passes are added while any line's interval straddles
    the goal (`floor_report.decided`)."""
    world = args.world_size or (2 if args.cpu else torch.cuda.device_count())
    if world < 1:
        raise SystemExit("the floor needs CUDA GPUs (or --cpu)")
    calls = [int(c) for c in str(args.calls).split(",") if c]
    takes = [_events_lines(world, args)]
    passes: list[dict[int, dict[Line, Pass]]] = []
    least = max(1, args.repeats)
    most = max(least, args.max_repeats or least)
    while True:
        passes.append({c: _through_the_evaluator(world, args, c) for c in calls})
        takes.append(_events_lines(world, args))
        lines = [_floor_line([t[i] for t in takes], passes, calls) for i in range(len(takes[0]))]
        done = all(decided(line, c) for line in lines for c in calls)
        if len(passes) >= most or (len(passes) >= least and done):
            break
    report: dict[str, Any] = {"world_size": world, "iters": args.iters, "calls": calls}
    report.update(bursts=args.bursts, warmup=WARMUP, burst_gap_s=BURST_GAP_S)
    report.update(repeats=len(passes), decided=done, lines=lines)
    report["environment"] = {
        "gpu": "CPU (gloo)" if args.cpu else torch.cuda.get_device_name(0),
        "torch": torch.__version__,
        "nccl": "-" if args.cpu else ".".join(map(str, torch.cuda.nccl.version())),
    }
    return report


@dataclasses.dataclass
class Pass:
    """One line of one evaluator pass: the median net per-call time of the candidate's
    rounds, the harness taken off it, and per pair (in order) the pair's net time and the
    burst of events taken right after it."""

    net_us: float | None
    harness_us: float | None
    pairs_us: list[float] = dataclasses.field(default_factory=list)
    beside_us: list[float] = dataclasses.field(default_factory=list)


def _floor_line(
    takes: list[dict[str, Any]], passes: list[dict[int, dict[Line, Pass]]], calls: list[int]
) -> dict[str, Any]:
    """One solution and size: every take of the events and every evaluator pass. The gap
    and its interval are over the pairs, each less the burst beside it; `gap_takes` holds
    each pass against the mean of the takes around it, as the floor did before."""
    key = (takes[0]["solution"], takes[0]["n"])
    line: dict[str, Any] = {"solution": key[0], "n": key[1]}
    events = [t["events_us"] for t in takes]
    around = [(a + b) / 2 for a, b in zip(events, events[1:], strict=False)]
    line["events_takes_us"] = events
    line["events_us"] = statistics.median(around)
    line["fresh_us"] = statistics.median(t["fresh_us"] for t in takes)
    for c in calls:
        found = [p[c].get(key, Pass(None, None)) for p in passes]
        harness = [f.harness_us for f in found if f.harness_us is not None]
        line[f"harness_{c}_us"] = statistics.median(harness) if harness else None
        line[f"evaluator_{c}_us"] = line[f"gap_{c}_us"] = None
        nets = [f.net_us for f in found if f.net_us is not None]
        if len(nets) < len(passes):
            continue
        line[f"evaluator_passes_{c}_us"] = nets
        line[f"evaluator_{c}_us"] = statistics.median(nets)
        line[f"gap_takes_{c}_us"] = statistics.median(
            net - base for net, base in zip(nets, around, strict=True)
        )
        beside = [b for f in found for b in f.beside_us]
        gaps = [n - b for f in found for n, b in zip(f.pairs_us, f.beside_us, strict=True)]
        if gaps:
            line[f"events_beside_{c}_us"] = statistics.median(beside)
            line[f"gap_{c}_us"], *interval = median_interval(gaps, GAP_CONFIDENCE)
            line[f"gap_{c}_interval_us"] = interval
            line[f"gap_{c}_pairs"] = len(gaps)
    return line


def _through_the_evaluator(world: int, args: argparse.Namespace, calls: int) -> dict[Line, Pass]:
    """The same two solutions judged by the whole evaluator, `calls` per round, a burst of
    events of the same line after each pair; by (solution, elements)."""
    sizes = sizes_of(args, cpu=args.cpu)
    dtype = "float32" if args.cpu else "bfloat16"
    problems = {
        "floor-all-reduce": all_reduce_problem(
            "floor-all-reduce", all_reduce.solution, sizes, dtype
        ),
        "floor-copy": all_reduce_problem("floor-copy", copy_reference, sizes, dtype),
    }
    sources = {"floor-all-reduce": REFERENCE_SOURCE, "floor-copy": COPY_SOURCE}
    settings = load_settings({**os.environ, "PKB_PROFILE": "cpu" if args.cpu else "h200x2"})
    settings = dataclasses.replace(
        settings,
        trials=1,
        rounds=(rounds := args.rounds or 10),
        max_rounds=rounds,
        iters=rounds * calls,
    )
    backend = "gloo" if args.cpu else "nccl"
    profile = HardwareProfile("floor", "floor", "-", world, backend=backend, case_kind="eval")
    names = dict(zip(problems, SOLUTIONS, strict=True))
    beside: dict[Line, list[float]] = {}
    events = EventsBeside(world, args)
    try:

        def after_pair(slug: str, case: str) -> None:
            line = (names[slug], int(case.split("=")[1]))
            beside.setdefault(line, []).append(events.burst(line))

        results, _ = evaluate_bundle(
            bundle_of(sources, problems),
            slugs=list(problems),
            profile=profile,
            settings=settings,
            evaluation_id=f"floor-{uuid.uuid4()}",
            problems=problems,
            between_pairs=after_pair,
        )
    finally:
        events.close()
    found: dict[Line, Pass] = {}
    for r in results:
        for c in r.cases:
            line = (names[r.slug], int(c.case.split("=")[1]))
            found[line] = Pass(
                c.time_us,
                c.rounds[0]["harness_us"] if c.rounds else None,
                [p["candidate_us"] for p in c.rounds],
                beside.get(line, []),
            )
    return found


if __name__ == "__main__":
    raise SystemExit(main())
