"""Times every reference of the catalog at its eval shapes (numbers to read, not a test).

    python -m evaluator.tools.references [--world-size 4] [--cases eval] [--slug S ...]
                                         [--category C ...] [--json OUT]

One process per GPU, one NCCL process group for the whole run, as a worker host runs
them. Per problem and case it prints the reference's median time (the evaluator's own
timing: `evaluator.tools.timing.time_calls` and `summarize`, slowest rank per iteration, inputs
rotated), the bytes one rank must move, the floor those bytes set at the measured peer
bandwidth (`evaluator.probe`), the reference's roofline fraction and the peak memory of
the busiest rank. A problem that fails on GPUs is reported and the run goes on.
On a CPU-only machine it runs over gloo (for a quick check of the script itself).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import tempfile
import time
import traceback
from datetime import timedelta
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from evaluator.judge.roofline import floor_us
from evaluator.rank_process import NO_MULTICAST
from evaluator.tools.probe import measure_peer_bandwidth
from evaluator.tools.timing import summarize, time_calls
from problems.registry import all_problems
from problems.spec import Case, Category, InputContext, Problem

ROTATION = 3
SEED = 20261122


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m evaluator.tools.references", description=__doc__
    )
    default_world = max(torch.cuda.device_count(), 2)
    parser.add_argument("--world-size", type=int, default=default_world)
    parser.add_argument("--cases", choices=["dev", "eval"], default="eval")
    parser.add_argument("--slug", action="append", help="only these problems (repeatable)")
    parser.add_argument(
        "--category",
        action="append",
        choices=[c.value for c in Category],
        help="only these categories (repeatable)",
    )
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--iters", type=int, default=50)
    parser.add_argument("--json", type=Path, help="write the numbers here too")
    args = parser.parse_args(argv)
    os.environ.update(NO_MULTICAST)

    problems = [
        p
        for p in all_problems()
        if args.world_size in p.world_sizes
        and (not args.slug or p.slug in args.slug)
        and (not args.category or p.category in args.category)
    ]
    began = time.monotonic()
    report = _run_ranks(args, [p.slug for p in problems])
    report["wall_s"] = time.monotonic() - began
    print(table(report))
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))
    return 0 if all(row.get("error") is None for row in report["rows"]) else 1


def _run_ranks(args: argparse.Namespace, slugs: list[str]) -> dict[str, Any]:
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    with tempfile.TemporaryDirectory() as tmp:
        order = (args.world_size, slugs, args.cases, args.warmup, args.iters, f"{tmp}/store")
        procs = [ctx.Process(target=_rank, args=(r, order, queue)) for r in range(args.world_size)]
        for proc in procs:
            proc.start()
        report = queue.get()  # rank 0's, once every case is done
        for proc in procs:
            proc.join(timeout=60)
    return report


def _rank(rank: int, order: tuple, queue: Any) -> None:
    world, slugs, kind, warmup, iters, store = order
    cuda = torch.cuda.is_available()
    device = torch.device("cuda", rank) if cuda else torch.device("cpu")
    kwargs: dict[str, Any] = {"device_id": device} if cuda else {}
    if cuda:
        torch.cuda.set_device(device)
    dist.init_process_group(
        "nccl" if cuda else "gloo",
        init_method=f"file://{store}",
        rank=rank,
        world_size=world,
        timeout=timedelta(seconds=300),
        **kwargs,
    )
    from problems.registry import get_problem

    bandwidth = _peer_bandwidth() if cuda else None
    rows = []
    for slug in slugs:
        problem = get_problem(slug)
        for case in problem.cases(kind):
            row = _time_case(problem, case, rank, world, device, warmup, iters)
            row["floor_us"] = _floor(row, bandwidth)
            rows.append(row)
            if rank == 0:
                print(_line(row), flush=True)
    if rank == 0:
        queue.put(_report(rows, world, bandwidth, device, warmup, iters))
    dist.barrier()
    dist.destroy_process_group()


def _time_case(
    problem: Problem,
    case: Case,
    rank: int,
    world: int,
    device: torch.device,
    warmup: int,
    iters: int,
) -> dict[str, Any]:
    row: dict[str, Any] = {
        "slug": problem.slug,
        "category": str(problem.category),
        "case": case.name,
        "dtype": case.dtype,
        "params": dict(case.params),
        "bytes_moved": problem.bytes_moved(case, world),
        "error": None,
    }
    times: list[float] = []
    peak = 0
    try:
        if device.type == "cuda":
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats(device)
        inputs = [_inputs(problem, case, rank, world, device, seed) for seed in range(ROTATION)]
        times, _ = time_calls(problem.reference, inputs, warmup=warmup, iters=iters, device=device)
        if device.type == "cuda":
            peak = torch.cuda.max_memory_allocated(device)
        del inputs
    except Exception:  # reported per case; the group survives unless a collective broke
        row["error"] = traceback.format_exc(limit=3).strip().splitlines()[-1]
    gathered: list[Any] = [None] * world
    dist.all_gather_object(gathered, (times, peak, row["error"]))
    errors = [e for _, _, e in gathered if e]
    row["error"] = errors[0] if errors else None
    if not errors:
        summary = summarize([t for t, _, _ in gathered])
        row["median_us"], row["iqr_us"] = summary.median_us, summary.spread_us
        row["peak_gib"] = max(p for _, p, _ in gathered) / 2**30
    return row


def _inputs(
    problem: Problem, case: Case, rank: int, world: int, device: torch.device, seed: int
) -> dict[str, Any]:
    ctx = InputContext(
        rank=rank, world_size=world, dtype=case.dtype, device=device, seed=SEED + seed
    )
    return problem.make_inputs(case, ctx)


def _peer_bandwidth() -> float | None:
    # The evaluator's probe, so the floors here are the ones a worker host would use.
    try:
        return measure_peer_bandwidth()["used"]
    except Exception:
        return None


def _floor(row: dict[str, Any], gbps: float | None) -> float | None:
    if not gbps or not row["bytes_moved"]:
        return None
    return floor_us(row["bytes_moved"], gbps)


def _report(rows: list, world: int, bandwidth: float | None, device: torch.device, w, n) -> dict:
    gpu = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    return {
        "world_size": world,
        "device": gpu,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "nccl": ".".join(map(str, torch.cuda.nccl.version())) if device.type == "cuda" else None,
        "peer_bandwidth_gbps": bandwidth,
        "warmup": w,
        "iters": n,
        "rotation": ROTATION,
        "rows": rows,
    }


def _us(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value / 1000:.2f} ms" if value >= 1000 else f"{value:.1f} us"


def _line(row: dict[str, Any]) -> str:
    if row["error"]:
        return f"{row['slug']} {row['case']}: ERROR {row['error']}"
    return f"{row['slug']} {row['case']}: {_us(row['median_us'])}"


def table(report: dict[str, Any]) -> str:
    header = (
        "problem",
        "case",
        "dtype",
        "bytes/rank",
        "floor",
        "reference",
        "iqr",
        "roofline",
        "peak mem",
    )
    lines = [header]
    for row in report["rows"]:
        if row["error"]:
            lines.append(
                (row["slug"], row["case"], row["dtype"], "", "", "ERROR", "", "", row["error"][:80])
            )
            continue
        floor = row["floor_us"]
        roof = f"{100 * floor / row['median_us']:.0f}%" if floor else "-"
        lines.append(
            (
                row["slug"],
                row["case"],
                row["dtype"],
                f"{row['bytes_moved'] / 2**20:.1f} MiB",
                _us(floor),
                _us(row["median_us"]),
                _us(row["iqr_us"]),
                roof,
                f"{row['peak_gib']:.2f} GiB",
            )
        )
    widths = [max(len(str(r[i])) for r in lines) for i in range(len(header))]
    out = [" | ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=True)) for r in lines]
    out.insert(1, "-|-".join("-" * w for w in widths))
    total_ms = sum(r.get("median_us", 0.0) for r in report["rows"]) / 1000
    out.append(
        f"\n{report['world_size']} ranks on {report['device']}; torch {report['torch']}, "
        f"CUDA {report['cuda']}, NCCL {report['nccl']}; peer bandwidth "
        f"{report['peer_bandwidth_gbps'] or '-'} GB/s; {report['warmup']} warm-up and "
        f"{report['iters']} timed calls over {report['rotation']} input sets; sum of medians "
        f"{total_ms:.1f} ms; wall {report.get('wall_s', 0):.0f} s"
    )
    return "\n".join(out)


if __name__ == "__main__":
    raise SystemExit(main())
