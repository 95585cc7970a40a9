"""Benchmarks of the evaluator on a host (numbers to read, not tests).

    python -m evaluator.tools.bench [--profile h200x4] [--bundle examples/symm] [--cases eval]
                              [--naive] [--json OUT]
    python -m evaluator.tools.bench --spread RUN.json RUN.json ... [--md OUT]

Prints, per problem of the bundle: reference time, the bundle's time, speedup and
roofline fraction of both (the floor is the problem's bytes over the host's measured
peer bandwidth). With --naive it also evaluates the same bundle the simple way, a fresh
process group per problem per trial with the same cases, trials and iterations, and prints
the ratio of the two wall times.

--spread reads the --json reports of several runs (of this evaluator or of an earlier
one: a case's speedup is its `speedup`, or reference time over time where a report has
none) and prints, per case, each run's speedup and the max/min spread against the limit
the leaderboard aims at (2% for cases at or above 200 us, 5% below), with the runs'
wall times.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import multiprocessing as mp
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from evaluator.__main__ import with_profile, zip_folder
from evaluator.contract import ProblemResult
from evaluator.host.profiles import HardwareProfile, get_profile
from evaluator.host.settings import Settings, load_settings
from evaluator.intake.bundle import Bundle, read_bundle
from evaluator.judge.compare import compare
from evaluator.judge.evaluate import evaluate_bundle
from evaluator.judge.problem_run import cases_for
from evaluator.judge.seeds import trial_seed
from evaluator.rank_process import NO_MULTICAST
from evaluator.tools.timing import summarize, time_calls
from problems.registry import all_problems, get_problem
from problems.spec import InputContext


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m evaluator.tools.bench",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--profile", default=None, help="default: PKB_PROFILE")
    parser.add_argument("--bundle", type=Path, default=Path("examples/symm"))
    parser.add_argument("--cases", choices=["dev", "eval"], default=None)
    parser.add_argument("--naive", action="store_true", help="also time the simple approach")
    parser.add_argument("--json", type=Path, help="write the numbers here too")
    parser.add_argument("--spread", type=Path, nargs="+", help="--json reports of runs")
    parser.add_argument("--md", type=Path, help="--spread: write the table here too")
    args = parser.parse_args(argv)
    if args.spread:
        table = spread_table([json.loads(path.read_text()) for path in args.spread])
        print(table)
        if args.md:
            args.md.write_text(table)
        return 0
    os.environ.update(NO_MULTICAST)

    settings = load_settings(with_profile(args.profile))
    profile = get_profile(settings.profile)
    if args.cases:
        profile = dataclasses.replace(profile, case_kind=args.cases)
    bundle = _bundle(args.bundle)
    slugs = sorted(bundle.solutions)

    began = time.monotonic()
    results, environment = evaluate_bundle(
        bundle, slugs=slugs, profile=profile, settings=settings, evaluation_id=str(uuid.uuid4())
    )
    ours_s = time.monotonic() - began
    report: dict[str, Any] = {
        "profile": profile.name,
        "cases": profile.case_kind,
        "bundle": str(args.bundle),
        "settings": {
            k: getattr(settings, k) for k in ("trials", "warmup", "iters", "rounds", "rotation")
        },
        "environment": environment,
        "results": [r.to_json() for r in results],
        "evaluator_wall_s": ours_s,
    }
    print(results_table(results, environment))
    print(f"\nevaluator wall time: {ours_s:.1f} s for {len(slugs)} problems")
    if args.naive:
        naive_s = naive_wall_time(args.bundle, slugs, profile=profile, settings=settings)
        report["naive_wall_s"] = naive_s
        print(f"fresh process group per problem per trial: {naive_s:.1f} s")
        print(f"ratio (naive / evaluator): {naive_s / ours_s:.1f}x")
    if args.json:
        args.json.write_text(json.dumps(report, indent=2, default=str))
    return 0 if all(r.status == "passed" for r in results) else 1


def _bundle(path: Path) -> Bundle:
    data = zip_folder(path) if path.is_dir() else path.read_bytes()
    return read_bundle(path.name + ".zip", data, known_slugs=[p.slug for p in all_problems()])


def _fmt_us(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value / 1000:.2f} ms" if value >= 1000 else f"{value:.1f} us"


def _fmt_speedup(value: float | None, low: float | None, high: float | None) -> str:
    if value is None:
        return "-"
    if low is None or high is None:
        return f"{value:.2f}x"
    return f"{value:.2f}x ({low:.2f}-{high:.2f})"


def _fmt_frac(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.0f}%"


def results_table(results: list[ProblemResult], environment: dict[str, Any]) -> str:
    """One row per case: reference and bundle times, speedup, and roofline fractions."""
    header = (
        "problem",
        "case",
        "bytes/rank",
        "floor",
        "reference",
        "ref roofline",
        "bundle",
        "bundle roofline",
        "speedup",
        "status",
    )
    rows = [header]
    for result in results:
        for case in result.cases or [None]:
            if case is None:
                rows.append(
                    (
                        result.slug,
                        "-",
                        "-",
                        "-",
                        "-",
                        "-",
                        "-",
                        "-",
                        "-",
                        f"{result.status}: {result.message[:60]}",
                    )
                )
                continue
            floor = case.floor_us
            ref_roof = floor / case.ref_time_us if floor and case.ref_time_us else None
            speed = case.speedup
            rows.append(
                (
                    result.slug,
                    f"{case.case} ({case.dtype})",
                    f"{case.bytes_moved / 2**20:.1f} MiB",
                    _fmt_us(floor),
                    _fmt_us(case.ref_time_us),
                    _fmt_frac(ref_roof),
                    _fmt_us(case.time_us),
                    _fmt_frac(case.roofline),
                    _fmt_speedup(speed, case.speedup_low, case.speedup_high),
                    str(result.status),
                )
            )
    widths = [max(len(str(row[i])) for row in rows) for i in range(len(header))]
    lines = [" | ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)) for row in rows]
    lines.insert(1, "-|-".join("-" * w for w in widths))
    bandwidth = environment.get("peer_bandwidth_gbps")
    where = f"{environment.get('gpu_count', '')}x {environment.get('gpu', environment.get('cpu'))}"
    lines.append(
        f"\n{environment.get('world_size')} ranks on {where}; torch "
        f"{environment.get('torch')}, CUDA {environment.get('cuda')}, NCCL "
        f"{environment.get('nccl')}, driver {environment.get('driver')}"
    )
    if bandwidth:
        lines.append(f"peer bandwidth (GB/s): {bandwidth}")
    return "\n".join(lines)


# --- repeatability ----------------------------------------------------------------------

SPREAD_LIMITS = ((200.0, 0.02), (0.0, 0.05))  # (from this time in us, the max/min spread)


def case_speedup(case: dict[str, Any]) -> float | None:
    if case.get("speedup"):
        return float(case["speedup"])
    if case.get("time_us") and case.get("ref_time_us"):
        return float(case["ref_time_us"]) / float(case["time_us"])
    return None


def spread_table(reports: list[dict[str, Any]]) -> str:
    """Per case: every run's speedup, max/min - 1, and whether it is within the limit."""
    runs: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for report in reports:
        for result in report["results"]:
            for case in result.get("cases", []):
                key = (result["slug"], f"{case['case']} ({case['dtype']})")
                runs.setdefault(key, []).append(case)
    names = " | ".join(f"run {i + 1}" for i in range(len(reports)))
    lines = [
        f"| problem | case | time | {names} | max/min | limit | within |",
        "|---" * (len(reports) + 6) + "|",
    ]
    lines += [_spread_row(slug, name, cases, len(reports)) for (slug, name), cases in runs.items()]
    walls = ", ".join(f"{r.get('evaluator_wall_s', 0):.1f} s" for r in reports)
    lines += ["", f"Evaluator wall time per run: {walls}."]
    return "\n".join(lines) + "\n"


def _spread_row(slug: str, name: str, cases: list[dict[str, Any]], runs: int) -> str:
    # The limit goes by the case's median time over the runs.
    times = sorted(c["time_us"] for c in cases if c.get("time_us"))
    time_us = times[len(times) // 2] if times else 0.0
    limit = next(limit for start, limit in SPREAD_LIMITS if time_us >= start)
    speedups = [case_speedup(c) for c in cases]
    cells = " | ".join(
        _fmt_speedup(v, c.get("speedup_low"), c.get("speedup_high"))
        for v, c in zip(speedups, cases, strict=True)
    )
    known = [v for v in speedups if v]
    spread, within = "-", "-"
    if known and len(known) == runs:
        ratio = max(known) / min(known) - 1
        spread, within = f"{100 * ratio:.1f}%", "yes" if ratio <= limit else "NO"
    return (
        f"| {slug} | {name} | {_fmt_us(time_us)} | {cells} | {spread} | {100 * limit:.0f}% "
        f"| {within} |"
    )


# --- the simple approach, for comparison ---------------------------------------------


def naive_wall_time(
    bundle_dir: Path, slugs: list[str], *, profile: HardwareProfile, settings: Settings
) -> float:
    """Judge like a simple harness: every trial spawns W fresh ranks and a process group.

    Same cases, trials, warm-up, iterations and input rotation as the evaluator; the
    reference is timed in the same fresh processes.
    """
    began = time.monotonic()
    for slug in slugs:
        problem = get_problem(slug)
        for case in cases_for(problem, profile.case_kind, settings):
            for trial in range(settings.trials):
                seed = trial_seed(settings.seed_secret, "naive", slug, case.name, trial)
                _spawn(profile, ("check", slug, str(bundle_dir / f"{slug}.py"), case, [seed]))
            seeds = [
                trial_seed(settings.seed_secret, "naive", slug, case.name, "t", k)
                for k in range(settings.rotation)
            ]
            _spawn(
                profile,
                (
                    "time",
                    slug,
                    str(bundle_dir / f"{slug}.py"),
                    case,
                    seeds,
                    settings.warmup,
                    settings.iters,
                ),
            )
    return time.monotonic() - began


def _spawn(profile: HardwareProfile, order: tuple) -> None:
    ctx = mp.get_context("spawn")
    with tempfile.TemporaryDirectory() as tmp:
        rendezvous = f"file://{tmp}/store"
        procs = [
            ctx.Process(
                target=_naive_rank, args=(r, profile.world_size, profile.backend, rendezvous, order)
            )
            for r in range(profile.world_size)
        ]
        for proc in procs:
            proc.start()
        for proc in procs:
            proc.join(timeout=600)
            if proc.exitcode != 0:
                raise RuntimeError(f"naive rank failed with exit code {proc.exitcode}: {order[:2]}")


def _naive_rank(rank: int, world: int, backend: str, rendezvous: str, order: tuple) -> None:
    kind, slug, path, case = order[:4]
    device = torch.device("cpu")
    kwargs: dict[str, Any] = {}
    if backend == "nccl":
        device = torch.device("cuda", rank)
        torch.cuda.set_device(device)
        kwargs["device_id"] = device
    dist.init_process_group(backend, init_method=rendezvous, rank=rank, world_size=world, **kwargs)
    sys.path.insert(0, str(Path(path).parent))
    spec = importlib.util.spec_from_file_location(f"naive_{slug.replace('-', '_')}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    problem = get_problem(slug)

    def inputs(seed: int) -> dict[str, Any]:
        ctx = InputContext(rank=rank, world_size=world, dtype=case.dtype, device=device, seed=seed)
        return problem.make_inputs(case, ctx)

    if kind == "check":
        args = inputs(order[4][0])
        verdict = compare(
            problem.reference(**args), module.solution(**args), problem.tolerance(case.dtype)
        )
        if not verdict.ok:
            raise SystemExit(f"wrong answer: {verdict.message}")
    else:
        seeds, warmup, iters = order[4:]
        rotated = [inputs(s) for s in seeds]
        for fn in (problem.reference, module.solution):
            times, _ = time_calls(fn, rotated, warmup=warmup, iters=iters, device=device)
            gathered: list[Any] = [None] * world
            dist.all_gather_object(gathered, times)
            summarize(gathered)
    dist.destroy_process_group()


if __name__ == "__main__":
    raise SystemExit(main())
