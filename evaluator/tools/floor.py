"""The harness's floor, and same code judged against itself (numbers to read, not tests).

    python -m evaluator.tools.floor --out DIR [--calls 10,50] [--repeats 3] [--max-repeats 9]
                                          [--cpu]
    python -m evaluator.tools.floor --calibrate --out DIR [--profile h200x2] [--rounds 20]

FLOOR (one process per GPU, started here; `--cpu`: two gloo ranks). The all-reduce
problem's reference at 64K, 1M and 16M bf16 elements (1K and 16K float32 on CPU), and an
empty solution that only copies its input into a preallocated output:
  - events:    back-to-back calls on one input between two CUDA events, in one process
               (the independent measurement, as nccl-tests times a collective), on the
               core the evaluator gives the rank's runners, in bursts of a round's
               length with a pause before each (the median over the bursts); taken
               before and after each of the evaluator's passes (--repeats), and their
               mean is what that pass is held against (a host's speed moves by tens of
               percent between minutes: docs/measurements); a line shows the medians
               over the passes;
  - fresh:     the same over a batch of fresh inputs;
  - evaluator: the whole evaluator (`runner.evaluate_bundle`): the median per-call time of
               the candidate's rounds, on the judge's clock (from before it writes a round's
               inputs to after it has read the outputs it checks), at each --calls per round,
               net of the harness: less the same round around calls that return at once
               (what the input copy, the messages and the output copies cost alone).
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
import multiprocessing as mp
import os
import statistics
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from queue import Empty
from typing import Any

import torch
import torch.distributed as dist

from evaluator.host.profiles import HardwareProfile
from evaluator.host.settings import load_settings
from evaluator.judge.canary import REFERENCE_SOURCE, all_reduce_problem, bundle_of
from evaluator.judge.evaluate import evaluate_bundle
from evaluator.judge.stats import median_interval
from evaluator.rank_process import NO_MULTICAST, cores_for
from evaluator.tools.calibrate import calibrate, clock_markdown
from evaluator.tools.floor_report import GAP_CONFIDENCE, decided, floor_markdown
from problems.collective import all_reduce
from problems.spec import Case, InputContext

GPU_SIZES: tuple[int, ...] = (1 << 16, 1 << 20, 1 << 24)
CPU_SIZES: tuple[int, ...] = (1 << 10, 1 << 14)
WARMUP = 10
# Between two bursts of the events lines: about the time the other side's rounds take.
BURST_GAP_S = 0.02
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
    parser.add_argument("--cpu", action="store_true", help="the floor over gloo, to try it")
    parser.add_argument("--port", type=int, default=29561, help="the floor's rendezvous port")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    os.environ.update(NO_MULTICAST)
    if args.calibrate:
        report = calibrate(args, GPU_SIZES, CPU_SIZES)
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

    Events, then the evaluator, then events again, `--repeats` times (each evaluator pass
    between two takes of the events): a host's speed moves by tens of percent between
    minutes, so each pass is held against the events around it, and a line reports the
    median over the passes of the evaluator, the events and the gap, and the gap's
    interval. Up to `--max-repeats`, passes are added while any line's interval straddles
    the goal (`floor_report.decided`)."""
    world = args.world_size or (2 if args.cpu else torch.cuda.device_count())
    if world < 1:
        raise SystemExit("the floor needs CUDA GPUs (or --cpu)")
    calls = [int(c) for c in str(args.calls).split(",") if c]
    takes = [_events_lines(world, args)]
    passes: list[dict[int, Any]] = []
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


def _floor_line(
    takes: list[dict[str, Any]],
    passes: list[dict[int, dict[tuple[str, int], tuple[float | None, float | None]]]],
    calls: list[int],
) -> dict[str, Any]:
    """One solution and size: every take of the events and every evaluator pass, each pass
    held against the mean of the takes before and after it; the medians of those."""
    line = {k: takes[0][k] for k in ("solution", "n")}
    events = [t["events_us"] for t in takes]
    around = [(a + b) / 2 for a, b in zip(events, events[1:], strict=False)]
    line["events_takes_us"] = events
    line["events_us"] = statistics.median(around)
    line["fresh_us"] = statistics.median(t["fresh_us"] for t in takes)
    for c in calls:
        found = [p[c].get((line["solution"], line["n"]), (None, None)) for p in passes]
        nets = [net for net, _ in found if net is not None]
        harness = [h for _, h in found if h is not None]
        line[f"harness_{c}_us"] = statistics.median(harness) if harness else None
        line[f"evaluator_{c}_us"] = line[f"gap_{c}_us"] = None
        if len(nets) == len(passes):
            gaps = [net - base for net, base in zip(nets, around, strict=True)]
            line[f"evaluator_passes_{c}_us"] = nets
            line[f"evaluator_{c}_us"] = statistics.median(nets)
            line[f"gap_{c}_us"], *interval = median_interval(gaps, GAP_CONFIDENCE)
            line[f"gap_{c}_interval_us"] = interval
    return line


def _events_lines(world: int, args: argparse.Namespace) -> list[dict[str, Any]]:
    """The events and fresh lines, from one process per rank (started here)."""
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    procs = [ctx.Process(target=_floor_rank, args=(r, world, args, queue)) for r in range(world)]
    for proc in procs:
        proc.start()
    lines = _from_rank_zero(queue, procs)
    for proc in procs:
        proc.join()
    return lines


def _from_rank_zero(queue: Any, procs: list[Any]) -> Any:
    while True:
        try:
            return queue.get(timeout=5)
        except Empty:
            if any(proc.exitcode for proc in procs):
                for proc in procs:
                    proc.kill()
                raise SystemExit("a rank failed") from None


SOLUTIONS = ("all-reduce reference", "empty (copy)")


def _floor_rank(rank: int, world: int, args: argparse.Namespace, queue: Any) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(args.port))
    if args.cpu:
        device, sizes, dtype = torch.device("cpu"), CPU_SIZES, "float32"
        dist.init_process_group("gloo", rank=rank, world_size=world)
    else:
        device, sizes, dtype = torch.device("cuda", rank), GPU_SIZES, "bfloat16"
        # Where the evaluator runs this rank's runners (unpinned, the same calls read up
        # to 1.4x slower on one H100: evaluator.tools.pinning).
        cores = cores_for("reference", rank, world, "nccl")
        if cores:
            os.sched_setaffinity(0, set(cores))
        torch.cuda.set_device(device)
        dist.init_process_group("nccl", rank=rank, world_size=world, device_id=device)
    lines = []
    for n in sizes:
        case = Case(f"n={n}", dtype, {"n": n})
        out = torch.empty(n, dtype=case_dtype(dtype), device=device)

        def copier(x: torch.Tensor, out: torch.Tensor = out) -> torch.Tensor:
            out.copy_(x)
            return out

        def make(seed: int, case: Case = case) -> dict[str, Any]:
            ctx = InputContext(
                rank=rank, world_size=world, dtype=case.dtype, device=device, seed=seed
            )
            return all_reduce.make_inputs(case, ctx)

        for name, fn in zip(SOLUTIONS, (all_reduce.solution, copier), strict=True):
            events = _events_over(fn, [make(0)], args, device)
            fresh = _events_over(fn, [make(1 + i) for i in range(10)], args, device)
            lines.append(
                {
                    "solution": name,
                    "n": n,
                    "events_us": _slowest([events], device)[0],
                    "fresh_us": _slowest([fresh], device)[0],
                }
            )
    if rank == 0:
        queue.put(lines)
    dist.destroy_process_group()


def case_dtype(name: str) -> torch.dtype:
    return {"float32": torch.float32, "bfloat16": torch.bfloat16}[name]


def _events_over(
    fn: Callable[..., Any], inputs: list[dict], args: argparse.Namespace, device: Any
) -> float:
    """The median over `--bursts` bursts of `--iters` back-to-back calls each, a pause
    before each. The evaluator's rounds are bursts too (a warm-up round, then the timed
    calls, after the other side's rounds), and its median over rounds spread over seconds
    samples the host's speed phases; a single take of back-to-back calls, a few ms long,
    caught a fast or a slow moment (2026-11-26: takes of one line minutes apart read 25
    and 49 us on one H200, docs/measurements/2026-11-26-pairs-to-settle.md)."""
    times = []
    for _ in range(max(1, args.bursts)):
        time.sleep(BURST_GAP_S)
        times.append(_burst(fn, inputs, args.iters, device))
    return statistics.median(times)


def _burst(fn: Callable[..., Any], inputs: list[dict], iters: int, device: Any) -> float:
    """Back-to-back calls between two events, taking the inputs in turn, after WARMUP."""
    for i in range(WARMUP):
        fn(**inputs[i % len(inputs)])
    if device.type != "cuda":
        dist.barrier()
        began = time.perf_counter()
        for i in range(iters):
            fn(**inputs[i % len(inputs)])
        return (time.perf_counter() - began) * 1e6 / iters
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize(device)
    dist.barrier()
    start.record()
    for i in range(iters):
        fn(**inputs[i % len(inputs)])
    end.record()
    end.synchronize()
    return start.elapsed_time(end) * 1000.0 / iters


def _slowest(times: list[float], device: Any) -> list[float]:
    column = torch.tensor(times, dtype=torch.float64, device=device)
    dist.all_reduce(column, op=dist.ReduceOp.MAX)
    return column.tolist()


def _through_the_evaluator(
    world: int, args: argparse.Namespace, calls: int
) -> dict[tuple[str, int], tuple[float | None, float | None]]:
    """The same two solutions judged by the whole evaluator, `calls` per round: the median
    per-call time of the candidate's rounds (net of the harness) and the harness's own
    per-call time that was taken off, by (solution, elements)."""
    sizes = CPU_SIZES if args.cpu else GPU_SIZES
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
    results, _ = evaluate_bundle(
        bundle_of(sources, problems),
        slugs=list(problems),
        profile=profile,
        settings=settings,
        evaluation_id=f"floor-{uuid.uuid4()}",
        problems=problems,
    )
    names = dict(zip(problems, SOLUTIONS, strict=True))
    return {
        (names[r.slug], int(c.case.split("=")[1])): (
            c.time_us,
            c.rounds[0]["harness_us"] if c.rounds else None,
        )
        for r in results
        for c in r.cases
    }


if __name__ == "__main__":
    raise SystemExit(main())
