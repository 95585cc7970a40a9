"""Same code judged against itself: the all-reduce reference as its own candidate, through
the whole evaluator (`python -m evaluator.tools.floor --calibrate`). Every pair of rounds
should read 1.00x; the report says what they read, how many pairs each case took and
whether its interval settled."""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import time
import uuid
from typing import Any

from evaluator.contract import CaseResult
from evaluator.host.profiles import get_profile
from evaluator.host.settings import load_settings
from evaluator.judge.canary import REFERENCE_SOURCE, all_reduce_problem, bundle_of
from evaluator.judge.evaluate import evaluate_bundle
from problems.collective import all_reduce


def calibrate(
    args: argparse.Namespace, gpu_sizes: tuple[int, ...], cpu_sizes: tuple[int, ...]
) -> dict[str, Any]:
    """Same code on both sides, judged with the profile's settings (`args`: floor's CLI)."""
    env = dict(os.environ)
    if args.profile:
        env["PKB_PROFILE"] = args.profile
    settings = load_settings(env)
    profile = get_profile(settings.profile)
    if args.world_size:
        profile = dataclasses.replace(profile, world_size=args.world_size)
    sizes = cpu_sizes if profile.backend == "gloo" else gpu_sizes
    per_round = -(-settings.iters // settings.rounds)
    least = args.rounds or settings.rounds
    most = max(least, args.max_rounds or settings.max_rounds or least)
    settings = dataclasses.replace(
        settings, rounds=least, max_rounds=most, iters=least * per_round, trials=1
    )
    dtype = "float32" if profile.backend == "gloo" else "bfloat16"
    problem = all_reduce_problem("all-reduce", all_reduce.solution, sizes, dtype)
    rounds: list[dict[str, Any]] = []
    began = time.monotonic()
    results, environment = evaluate_bundle(
        bundle_of({problem.slug: REFERENCE_SOURCE}, {problem.slug: problem}),
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
        "settings": {
            k: getattr(settings, k)
            for k in ("warmup", "iters", "rounds", "max_rounds", "target_halfwidth", "run_spread")
        },
        "wall_s": round(time.monotonic() - began, 1),
        "environment": environment,
        "rounds": rounds,
        "cases": _same_code(rounds, results[0].cases),
    }


def _same_code(rounds: list[dict[str, Any]], judged: list[CaseResult]) -> list[dict[str, Any]]:
    """Per case: the speedup as judged, which should read 1.00 (same code on both sides),
    its interval, how many pairs it took and whether it settled, the pairs' range, the
    median ratio of the pairs by which side went first (an order effect shows as a gap
    between the two; the crossover blocks of the speedup cancel it), and each side's
    median net time first and second (`by_position`): a side that pays for its position
    and the other does not leans the speedup by half the difference."""
    ratios: dict[str, dict[str, list[float]]] = {}
    for pair in rounds:
        if pair["candidate_us"] > 0:
            by_order = ratios.setdefault(pair["case"], {"reference": [], "candidate": []})
            by_order[pair["first"]].append(pair["reference_us"] / pair["candidate_us"])
    return [
        {
            "case": c.case,
            "median": c.speedup,
            "low": c.speedup_low,
            "high": c.speedup_high,
            "min": min(r["reference"] + r["candidate"]),
            "max": max(r["reference"] + r["candidate"]),
            "reference_first": _median(r["reference"]),
            "candidate_first": _median(r["candidate"]),
            "pairs": c.pairs,
            "settled": c.settled,
            "by_position": _by_position([p for p in rounds if p["case"] == c.case]),
        }
        for c in judged
        if (r := ratios.get(c.case))
    ]


def _by_position(pairs: list[dict[str, Any]]) -> dict[str, float | None]:
    """Each side's median net time (us a call) in the pairs where it went first, and
    where it went second."""
    return {
        f"{side}_{position}_us": _median(
            [p[f"{side}_us"] for p in pairs if (p["first"] == side) == (position == "first")]
        )
        for side in ("reference", "candidate")
        for position in ("first", "second")
    }


def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _us(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def clock_markdown(report: dict[str, Any]) -> str:
    lines = [
        f"# Same code on both sides: {report['profile']} ({report['backend']}, "
        f"{report['world_size']} ranks)",
        "",
        "`python -m evaluator.tools.floor --calibrate`: the all-reduce reference judged as "
        f"the candidate, {report['settings']['rounds']} to {report['settings']['max_rounds']} "
        "pairs of rounds per case (first side alternating); per-call "
        "times on the judges' clock. The speedup is the median of the crossover blocks "
        "(two pairs, one of each order); the interval is the one a result reports (the "
        "blocks' nominal 99% interval, widened by the host's run spread of "
        f"{report['settings'].get('run_spread', 0.0):.1%}); the last two columns the median "
        "pair ratio by which side went first.",
        "",
        "| case | pairs | settled | speedup | interval | lowest pair | highest pair "
        "| reference first | candidate first |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for c in report["cases"]:
        lines.append(
            f"| {c['case']} | {c['pairs']} | {c['settled']} | {c['median']:.3f} | "
            f"{c['low']:.3f} - {c['high']:.3f} | {c['min']:.2f} | {c['max']:.2f} | "
            f"{_ratio(c.get('reference_first'))} | {_ratio(c.get('candidate_first'))} |"
        )
    lines += [
        "",
        "Each side's median net time (us a call) by its place in the pair:",
        "",
        "| case | reference first | reference second | candidate first | candidate second |",
        "|---|---|---|---|---|",
    ]
    for c in report["cases"]:
        at = c.get("by_position") or {}
        cells = [
            _us(at.get(f"{side}_{position}_us"))
            for side in ("reference", "candidate")
            for position in ("first", "second")
        ]
        lines.append(f"| {c['case']} | " + " | ".join(cells) + " |")
    lines += ["", "| case | pair | reference (us per call) | candidate (us per call) |"]
    lines.append("|---|---|---|---|")
    counts: dict[str, int] = {}
    for pair in report["rounds"]:
        k = counts[pair["case"]] = counts.get(pair["case"], 0) + 1
        lines.append(
            f"| {pair['case']} | {k} | {pair['reference_us']:.1f} | {pair['candidate_us']:.1f} |"
        )
    lines += ["", f"Wall time: {report['wall_s']} s.", ""]
    return "\n".join(lines)
