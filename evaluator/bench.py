"""Benchmarks of the evaluator on a host (numbers to read, not tests).

    python -m evaluator.bench [--profile h200x4] [--bundle examples/symm] [--cases eval]
                              [--naive] [--json OUT]

Prints, per problem of the bundle: reference time, the bundle's time, speedup and
roofline fraction of both (the floor is the problem's bytes over the host's measured
peer bandwidth). With --naive it also evaluates the same bundle the simple way, a fresh
process group per problem per trial with the same cases, trials and iterations, and prints
the ratio of the two wall times.
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

from evaluator.__main__ import _with_profile, _zip_folder
from evaluator.bundle import Bundle, read_bundle
from evaluator.compare import compare
from evaluator.contract import ProblemResult
from evaluator.profiles import HardwareProfile, get_profile
from evaluator.ranks import NO_MULTICAST
from evaluator.runner import REFERENCE_TIMES, cases_for, evaluate_bundle
from evaluator.seeds import trial_seed
from evaluator.settings import Settings, load_settings
from evaluator.timing import summarize, time_calls
from problems.registry import all_problems, get_problem
from problems.spec import InputContext


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m evaluator.bench", description=__doc__)
    parser.add_argument("--profile", default=None, help="default: PKB_PROFILE")
    parser.add_argument("--bundle", type=Path, default=Path("examples/symm"))
    parser.add_argument("--cases", choices=["dev", "eval"], default=None)
    parser.add_argument("--naive", action="store_true", help="also time the simple approach")
    parser.add_argument("--json", type=Path, help="write the numbers here too")
    args = parser.parse_args(argv)
    os.environ.update(NO_MULTICAST)

    settings = load_settings(_with_profile(args.profile))
    profile = get_profile(settings.profile)
    if args.cases:
        profile = dataclasses.replace(profile, case_kind=args.cases)
    bundle = _bundle(args.bundle)
    slugs = sorted(bundle.solutions)

    REFERENCE_TIMES.clear()  # the reference is timed afresh, as the naive path must do
    began = time.monotonic()
    results, environment = evaluate_bundle(
        bundle, slugs=slugs, profile=profile, settings=settings, evaluation_id=str(uuid.uuid4())
    )
    ours_s = time.monotonic() - began
    report: dict[str, Any] = {
        "profile": profile.name,
        "cases": profile.case_kind,
        "bundle": str(args.bundle),
        "settings": {k: getattr(settings, k) for k in ("trials", "warmup", "iters", "rotation")},
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
    data = _zip_folder(path) if path.is_dir() else path.read_bytes()
    return read_bundle(path.name + ".zip", data, known_slugs=[p.slug for p in all_problems()])


def _fmt_us(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value / 1000:.2f} ms" if value >= 1000 else f"{value:.1f} us"


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
            speed = case.ref_time_us / case.time_us if case.time_us and case.ref_time_us else None
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
                    "-" if speed is None else f"{speed:.2f}x",
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
