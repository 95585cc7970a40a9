"""The harness's floor, and the trusted clock's margin (numbers to read, not tests).

    python -m evaluator.floor --out DIR [--iters 200] [--no-full] [--cpu]  (CUDA GPUs)
    python -m evaluator.floor --calibrate --out DIR [--profile h200x2] [--rounds 20]

FLOOR (GPU hosts; one process per GPU, started here: no torchrun). The all-reduce
problem's reference (NCCL) at 64K, 1M and 16M bf16 elements, and an empty solution that
only copies its input into a preallocated output, each timed:
  - events:  N back-to-back calls on one input between two CUDA events, in one process
             (the independent measurement, as nccl-tests times a collective);
  - rounds:  the evaluator's rounds (`timing.run_batch`: fresh inputs staged before the
             batch, a copy and a digest of each output after its call, outside its events);
  - parts:   where the floor comes from: the events over a batch of fresh inputs, per-call
             events over one input, and the rounds with nothing, a copy, or a copy and
             its digest (the rounds before 2026-11-23) after each call;
  - former:  the former loop (`timing.run_timed`: a device synchronise and a barrier
             around every call, a copy after it);
  - evaluator: the whole evaluator (`runner.evaluate_bundle`, rank pools, commitments,
             checks): the median candidate round of a bundle holding the same two
             solutions (leave out with --no-full).
Per line the slowest rank per call, median in us. Writes floor.json and floor.md.
On a host of one GPU it runs one rank: the harness's own per-call cost is all there is to
see (NCCL's all-reduce of one rank is a local copy), not the collective's; the table says so.

CALIBRATE (any profile, CPU included). Judges a bundle whose solution IS the all-reduce
reference through the whole evaluator with the clock check off, and records for every
pair of rounds the time the parent saw that the reported calls do not explain, around the
reference's calls (judge processes) and around the same calls in candidate processes.
Honest code must never exceed what the check allows (runner._ProblemRun._check_clock):
    unexplained(candidate) <= max unexplained(reference so far) * (1 + REL) + MARGIN
Writes clock.json and clock.md with the margin each round needed and the one to set
(PKB_CLOCK_MARGIN_S, PKB_CLOCK_MARGIN_REL).
"""

from __future__ import annotations

import argparse
import dataclasses
import io
import json
import multiprocessing as mp
import os
import statistics
import time
import uuid
import zipfile
from collections.abc import Callable
from pathlib import Path
from queue import Empty
from typing import Any

import torch
import torch.distributed as dist

from evaluator.bundle import read_bundle
from evaluator.profiles import HardwareProfile, get_profile
from evaluator.ranks import NO_MULTICAST, _Commitment
from evaluator.runner import evaluate_bundle
from evaluator.settings import load_settings
from evaluator.timing import copy_output, digest, run_batch, run_timed
from problems.collective import all_reduce
from problems.spec import Case, InputContext, Problem

GPU_SIZES = (1 << 16, 1 << 20, 1 << 24)
CPU_SIZES = (1 << 10, 1 << 14)
WARMUP = 10
BATCH = 10  # timed calls per round, as the evaluator's nccl default (100 iters, 10 rounds)
# The goal for the harness: within 15% of the events, or 5 us, whichever is larger.
GOAL_REL, GOAL_US = 0.15, 5.0

REFERENCE_SOURCE = "from problems.collective.all_reduce import solution  # noqa: F401\n"
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
        prog="python -m evaluator.floor",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--out", type=Path, required=True, help="folder for the JSON and md")
    parser.add_argument("--calibrate", action="store_true", help="the clock's margin instead")
    parser.add_argument("--profile", default=None, help="--calibrate: default PKB_PROFILE")
    parser.add_argument("--world-size", type=int, default=None)
    parser.add_argument("--rounds", type=int, default=20, help="--calibrate: pairs per case")
    parser.add_argument("--iters", type=int, default=200, help="timed calls per line")
    parser.add_argument("--no-full", action="store_true", help="leave the evaluator out")
    parser.add_argument("--cpu", action="store_true", help="the floor over gloo, to try it")
    parser.add_argument("--port", type=int, default=29561, help="the floor's rendezvous port")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    os.environ.update(NO_MULTICAST)
    if args.calibrate:
        report = calibrate(args)
        _write(args.out, "clock", report, clock_markdown(report))
        return 0
    report = floor(args)
    _write(args.out, "floor", report, floor_markdown(report))
    return 0


def _write(folder: Path, name: str, report: dict[str, Any], markdown: str) -> None:
    (folder / f"{name}.json").write_text(json.dumps(report, indent=2, default=str))
    (folder / f"{name}.md").write_text(markdown)
    print(markdown)


# --- the clock's margin ------------------------------------------------------------------


def calibrate(args: argparse.Namespace) -> dict[str, Any]:
    env = dict(os.environ)
    if args.profile:
        env["PKB_PROFILE"] = args.profile
    settings = load_settings(env)
    profile = get_profile(settings.profile)
    if args.world_size:
        profile = dataclasses.replace(profile, world_size=args.world_size)
    sizes = CPU_SIZES if profile.backend == "gloo" else GPU_SIZES
    # As many calls per round as the profile's evaluations make; the check off (an
    # infinite margin): every round is recorded, none cut short.
    per_round = -(-settings.iters // settings.rounds)
    settings = dataclasses.replace(
        settings,
        rounds=args.rounds,
        iters=args.rounds * per_round,
        trials=1,
        clock_margin_s=float("inf"),
    )
    dtype = "float32" if profile.backend == "gloo" else "bfloat16"
    problem = _problem("all-reduce", all_reduce.solution, sizes, dtype)
    rounds: list[dict[str, Any]] = []
    began = time.monotonic()
    results, environment = evaluate_bundle(
        _bundle({problem.slug: REFERENCE_SOURCE}, {problem.slug: problem}),
        slugs=[problem.slug],
        profile=dataclasses.replace(profile, case_kind="eval"),
        settings=settings,
        evaluation_id=f"calibrate-{uuid.uuid4()}",
        problems={problem.slug: problem},
        on_round=lambda slug, case, pair: rounds.append({"case": case, **pair}),
    )
    if results[0].status != "passed":
        raise SystemExit(f"the reference did not pass: {results[0].message}")
    return {
        "profile": profile.name,
        "world_size": profile.world_size,
        "backend": profile.backend,
        "settings": {k: getattr(settings, k) for k in ("warmup", "iters", "rounds")},
        "rel": settings.clock_margin_rel,
        "wall_s": round(time.monotonic() - began, 1),
        "environment": environment,
        "rounds": _with_needs(rounds, settings.clock_margin_rel),
        "margin_s": _margin(rounds, settings.clock_margin_rel),
    }


def _with_needs(rounds: list[dict[str, Any]], rel: float) -> list[dict[str, Any]]:
    """Each pair with the margin it needed: what its candidate round's unexplained time
    exceeded the allowance by, the allowance being the case's largest reference one so
    far times (1 + rel), as the check computes it."""
    largest: dict[str, float] = {}
    for pair in rounds:
        ref = largest[pair["case"]] = max(
            largest.get(pair["case"], 0.0), pair["reference_overhead_s"]
        )
        pair["needed_s"] = max(0.0, pair["candidate_overhead_s"] - ref * (1 + rel))
        # What a check without the relative part (REL = 0) would have needed.
        pair["needed_without_rel_s"] = max(0.0, pair["candidate_overhead_s"] - ref)
    return rounds


def _margin(rounds: list[dict[str, Any]], rel: float) -> dict[str, float]:
    needed = [p["needed_s"] for p in rounds]
    ratios = [
        p["candidate_overhead_s"] / p["reference_overhead_s"]
        for p in rounds
        if p["reference_overhead_s"] > 0
    ]
    worst = max(needed, default=0.0)
    return {
        "worst_needed_s": worst,
        "worst_needed_without_rel_s": max(p["needed_without_rel_s"] for p in rounds),
        "median_reference_overhead_s": statistics.median(
            [p["reference_overhead_s"] for p in rounds]
        ),
        "max_overhead_ratio": max(ratios, default=0.0),
        # Three times the worst honest need, and no less than the harness's own typical
        # unexplained time: a cheat must hide more than this per round, beyond
        # (1 + rel) x the harness's own, to be flagged.
        "suggested_margin_s": round(
            max(3 * worst, statistics.median(p["reference_overhead_s"] for p in rounds)), 4
        ),
    }


def clock_markdown(report: dict[str, Any]) -> str:
    margin = report["margin_s"]
    lines = [
        f"# The trusted clock's margin: {report['profile']} ({report['backend']}, "
        f"{report['world_size']} ranks)",
        "",
        "`python -m evaluator.floor --calibrate`: the all-reduce reference judged as the "
        f"candidate, {report['settings']['rounds']} pairs of rounds per case, clock check off. "
        "Unexplained time = what the parent saw of a round minus the sum of the reported "
        "call times (ms, largest rank).",
        "",
        "| case | pair | reference round (us) | candidate round (us) | unexplained, "
        "reference (ms) | unexplained, candidate (ms) | margin needed (ms) | checked calls |",
        "|---|---|---|---|---|---|---|---|",
    ]
    counts: dict[str, int] = {}
    for pair in report["rounds"]:
        k = counts[pair["case"]] = counts.get(pair["case"], 0) + 1
        lines.append(
            f"| {pair['case']} | {k} | {pair['reference_us']:.1f} | {pair['candidate_us']:.1f} "
            f"| {1e3 * pair['reference_overhead_s']:.2f} "
            f"| {1e3 * pair['candidate_overhead_s']:.2f} | {1e3 * pair['needed_s']:.2f} "
            f"| {pair.get('candidate_checked', '-')} |"
        )
    lines += ["", *_same_code_speedups(report["rounds"])]
    lines += [
        "",
        f"REL = {report['rel']}; worst margin needed: {1e3 * margin['worst_needed_s']:.2f} ms "
        f"({1e3 * margin['worst_needed_without_rel_s']:.2f} ms with REL = 0); "
        f"largest candidate/reference ratio: {margin['max_overhead_ratio']:.2f}; median "
        f"reference unexplained time: {1e3 * margin['median_reference_overhead_s']:.2f} ms.",
        f"Suggested PKB_CLOCK_MARGIN_S={margin['suggested_margin_s']} "
        f"(PKB_CLOCK_MARGIN_REL={report['rel']}). Wall time: {report['wall_s']} s.",
        "",
    ]
    return "\n".join(lines)


# --- the floor --------------------------------------------------------------------------


def floor(args: argparse.Namespace) -> dict[str, Any]:
    """The floor table; `--cpu` runs it over gloo, to try the command without GPUs."""
    world = args.world_size or (2 if args.cpu else torch.cuda.device_count())
    if world < 1:
        raise SystemExit("the floor needs CUDA GPUs (or --cpu)")
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    procs = [ctx.Process(target=_floor_rank, args=(r, world, args, queue)) for r in range(world)]
    for proc in procs:
        proc.start()
    lines = _from_rank_zero(queue, procs)
    for proc in procs:
        proc.join()
    report: dict[str, Any] = {"world_size": world, "iters": args.iters, "lines": lines}
    if not args.no_full:
        report["evaluator"] = _through_the_evaluator(world, cpu=args.cpu)
    report["environment"] = {
        "gpu": "CPU (gloo)" if args.cpu else torch.cuda.get_device_name(0),
        "torch": torch.__version__,
        "nccl": "-" if args.cpu else ".".join(map(str, torch.cuda.nccl.version())),
    }
    return report


def _from_rank_zero(queue: Any, procs: list[Any]) -> Any:
    while True:
        try:
            return queue.get(timeout=5)
        except Empty:
            if any(proc.exitcode for proc in procs):
                for proc in procs:
                    proc.kill()
                raise SystemExit("a rank failed") from None


def _floor_rank(rank: int, world: int, args: argparse.Namespace, queue: Any) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(args.port))
    if args.cpu:
        device, sizes = torch.device("cpu"), CPU_SIZES
        dist.init_process_group("gloo", rank=rank, world_size=world)
    else:
        device, sizes = torch.device("cuda", rank), GPU_SIZES
        torch.cuda.set_device(device)
        dist.init_process_group("nccl", rank=rank, world_size=world, device_id=device)
    lines = []
    for n in sizes:
        case = Case(f"n={n}", "bfloat16", {"n": n})
        out = torch.empty(n, dtype=torch.bfloat16, device=device)

        def copier(x: torch.Tensor, out: torch.Tensor = out) -> torch.Tensor:
            out.copy_(x)
            return out

        def make(seed: int, case: Case = case) -> dict[str, Any]:
            ctx = InputContext(
                rank=rank, world_size=world, dtype=case.dtype, device=device, seed=seed
            )
            return all_reduce.make_inputs(case, ctx)

        for name, fn in (("all-reduce reference", all_reduce.solution), ("empty (copy)", copier)):
            line: dict[str, Any] = {"solution": name, "n": n}
            line["events_us"] = _slowest([_events(fn, make(0), args.iters, device)], device)[0]
            for key, way in (("rounds_us", _rounds), ("former_us", _former), *_PARTS):
                line[key] = statistics.median(_slowest(way(fn, make, args.iters, device), device))
            lines.append(line)
    if rank == 0:
        queue.put(lines)
    dist.destroy_process_group()


def _events(fn: Callable[..., Any], args: dict[str, Any], iters: int, device: Any) -> float:
    """Back-to-back calls between two CUDA events (two timestamps on CPU), per call."""
    return _events_over(fn, [args], iters, device)


def _events_over(fn: Callable[..., Any], inputs: list[dict], iters: int, device: Any) -> float:
    """Back-to-back calls between two events, taking the staged inputs in turn."""
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


def _staged_events(fn: Callable[..., Any], make: Callable[[int], Any], iters: int, device: Any):
    """Back to back, but over a batch's worth of fresh inputs: what fresh inputs cost."""
    return [_events_over(fn, [make(1 + i) for i in range(BATCH)], iters, device)]


def _per_call_one_input(fn: Callable[..., Any], make: Callable[[int], Any], iters: int, device):
    """Per-call events over one input, nothing after a call: what the events cost."""
    args, times = make(1), []
    while len(times) < iters:
        times += run_batch(fn, [args] * BATCH, device=device, after_call=lambda i, out: None)
    return times[:iters]


def _in_rounds(
    fn: Callable[..., Any], make: Callable[[int], Any], iters: int, device: Any, commit: Any
) -> list:
    """Warm-up batch, then timed batch, fresh inputs each; `commit(keep)` gives a batch's
    work after each call (`after_call`) and after the batch (`commitments`)."""
    times: list[float] = []
    seed = 1
    while len(times) < iters:
        for count, keep in ((WARMUP, False), (BATCH, True)):
            inputs = [make(seed + i) for i in range(count)]
            seed += count
            commitment = commit(keep)
            batch = run_batch(fn, inputs, device=device, after_call=commitment.after_call)
            commitment.commitments()
            if keep:
                times += batch
    return times[:iters]


def _rounds(fn: Callable[..., Any], make: Callable[[int], Any], iters: int, device: Any) -> list:
    """The evaluator's rounds: no parent to reveal to, but the copies and digests are made."""
    return _in_rounds(fn, make, iters, device, lambda keep: _Commitment(None, keep=keep))  # type: ignore[arg-type]


@dataclasses.dataclass
class _After:
    """Only part of a round's work after each call, and nothing after the batch."""

    after: Callable[[Any], Any]

    def after_call(self, index: int, out: Any) -> None:
        self.after(out)

    def commitments(self) -> list:
        return []


def _rounds_with(after: Callable[[Any], Any]) -> Callable[..., list]:
    """The rounds with only part of the work after each call: where the floor comes from."""
    return lambda fn, make, iters, device: _in_rounds(
        fn, make, iters, device, lambda keep: _After(after)
    )


# Back to back over fresh inputs; per-call events over one input; the rounds with nothing,
# a copy of the output, or the copy and its digest (the rounds) after each call.
_PARTS = (
    ("staged_events_us", _staged_events),
    ("one_input_us", _per_call_one_input),
    ("bare_us", _rounds_with(lambda out: None)),
    ("copied_us", _rounds_with(copy_output)),
    ("digested_us", _rounds_with(lambda out: digest(copy_output(out)))),
)


def _former(fn: Callable[..., Any], make: Callable[[int], Any], iters: int, device: Any) -> list:
    calls = WARMUP + iters
    times = run_timed(
        fn, make, calls=calls, device=device, after_call=lambda i, out: copy_output(out)
    )
    return times[WARMUP:]


def _slowest(times: list[float], device: Any) -> list[float]:
    column = torch.tensor(times, dtype=torch.float64, device=device)
    dist.all_reduce(column, op=dist.ReduceOp.MAX)
    return column.tolist()


def _through_the_evaluator(world: int, *, cpu: bool) -> list[dict[str, Any]]:
    """The same two solutions judged by the whole evaluator on this host's GPUs."""
    sizes = CPU_SIZES if cpu else GPU_SIZES
    problems = {
        "floor-all-reduce": _problem("floor-all-reduce", all_reduce.solution, sizes),
        "floor-copy": _problem("floor-copy", copy_reference, sizes),
    }
    sources = {"floor-all-reduce": REFERENCE_SOURCE, "floor-copy": COPY_SOURCE}
    settings = load_settings({**os.environ, "PKB_PROFILE": "cpu" if cpu else "h200x2"})
    backend = "gloo" if cpu else "nccl"
    profile = HardwareProfile("floor", "floor", "-", world, backend=backend, case_kind="eval")
    began = time.monotonic()
    results, _ = evaluate_bundle(
        _bundle(sources, problems),
        slugs=list(problems),
        profile=profile,
        settings=settings,
        evaluation_id=f"floor-{uuid.uuid4()}",
        problems=problems,
    )
    wall = time.monotonic() - began
    return [
        {
            "problem": r.slug,
            "status": str(r.status),
            "flags": r.flags,
            "wall_s": round(wall, 1),
            "cases": [
                {"case": c.case, "candidate_us": c.time_us, "reference_us": c.ref_time_us}
                for c in r.cases
            ],
        }
        for r in results
    ]


def _problem(
    slug: str, reference: Callable[..., Any], sizes: tuple[int, ...], dtype: str = "bfloat16"
) -> Problem:
    cases = tuple(Case(f"n={n}", dtype, {"n": n}) for n in sizes)
    # One rank too: a host of one GPU measures the harness's own cost (see the docstring).
    return dataclasses.replace(
        all_reduce.PROBLEM,
        slug=slug,
        reference=reference,
        dev_cases=cases,
        eval_cases=cases,
        world_sizes=(1, *all_reduce.PROBLEM.world_sizes),
    )


def _bundle(sources: dict[str, str], problems: dict[str, Problem]) -> Any:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as archive:
        for slug, source in sources.items():
            archive.writestr(f"{slug}.py", source)
    return read_bundle("floor.zip", buf.getvalue(), known_slugs=problems)


def _same_code_speedups(rounds: list[dict[str, Any]]) -> list[str]:
    """Both sides run the same code here: every pair's speedup should read 1.00."""
    ratios: dict[str, list[float]] = {}
    for pair in rounds:
        if pair["candidate_us"] > 0:
            ratios.setdefault(pair["case"], []).append(pair["reference_us"] / pair["candidate_us"])
    return [
        f"Same code on both sides, {case}: median pair speedup {statistics.median(r):.3f} "
        f"(pairs from {min(r):.2f} to {max(r):.2f})."
        for case, r in ratios.items()
    ]


def floor_markdown(report: dict[str, Any]) -> str:
    lines = [
        f"# The harness's floor ({report['world_size']} ranks, {report['environment']['gpu']})",
        "",
        f"Slowest rank per call, median of {report['iters']} calls, us. Goal: the rounds "
        f"within {GOAL_REL:.0%} of the events, or {GOAL_US:g} us.",
        "",
        *_one_rank_note(report["world_size"]),
        "| solution | elements | events (back to back) | rounds (now) | former loop | "
        "rounds - events | goal | events, over fresh inputs | per-call events, one input | "
        "rounds, nothing after a call | a copy after | a copy and digest after (former) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for line in report["lines"]:
        gap = line["rounds_us"] - line["events_us"]
        met = gap <= max(GOAL_REL * line["events_us"], GOAL_US)
        parts = " | ".join(_us(line.get(key)) for key, _ in _PARTS)
        lines.append(
            f"| {line['solution']} | {line['n']} | {line['events_us']:.1f} | "
            f"{line['rounds_us']:.1f} | {line['former_us']:.1f} | {gap:+.1f} | "
            f"{'met' if met else 'NOT met'} | {parts} |"
        )
    for result in report.get("evaluator", []):
        lines += [
            "",
            f"Through the whole evaluator: {result['problem']} ({result['status']}"
            f"{', flags ' + ', '.join(result['flags']) if result['flags'] else ''}; "
            f"{result['wall_s']} s for both problems)",
            "",
        ]
        lines += ["| case | candidate (median round) | reference (median round) |", "|---|---|---|"]
        for case in result["cases"]:
            lines.append(
                f"| {case['case']} | {_us(case['candidate_us'])} | {_us(case['reference_us'])} |"
            )
    return "\n".join(lines) + "\n"


def _one_rank_note(world: int) -> list[str]:
    if world > 1:
        return []
    return [
        "One rank (a host of one GPU): NCCL's all-reduce of one rank is a local copy, so "
        "these lines show the harness's own per-call cost, not a collective's.",
        "",
    ]


def _us(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


if __name__ == "__main__":
    raise SystemExit(main())
