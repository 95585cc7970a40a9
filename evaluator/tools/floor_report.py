"""The floor's table (`evaluator.tools.floor`): its lines read against the goal, and
written out as markdown. Reading only: the measuring is floor.py's."""

from __future__ import annotations

from typing import Any

# The goal for the harness: within 15% of the events, or 5 us, whichever is larger.
GOAL_REL, GOAL_US = 0.15, 5.0
# A line's interval for its median gap over its pairs, each less the burst of events taken
# right after it (judge/stats.median_interval): under six pairs the range of their gaps,
# which holds the median with 1 - 2^(1-n).
GAP_CONFIDENCE = 0.95


def verdict(line: dict[str, Any], calls: int) -> str:
    """Whether a line meets the goal: on the median gap over the pairs, "within noise"
    where the gap's interval straddles the goal. Held against takes of the events around
    whole passes, a launch-bound line's passes moved by +-20 us with the host's speed on
    one H100 (docs/measurements/2026-11-26-both-sides-stopped.md): a median alone would
    read met or not by chance."""
    gap = line.get(f"gap_{calls}_us")
    if gap is None:
        return "NOT met"
    said = "met" if gap <= goal(line, calls) else "NOT met"
    return said if decided(line, calls) else f"{said}, within noise"


def decided(line: dict[str, Any], calls: int) -> bool:
    """Whether the line's gap interval lies wholly on one side of the goal (a line without
    an evaluator reading is decided: more passes would not give it one)."""
    gap = line.get(f"gap_{calls}_us")
    if gap is None:
        return True
    low, high = line.get(f"gap_{calls}_interval_us") or (gap, gap)
    return not low <= goal(line, calls) < high


def goal(line: dict[str, Any], calls: int) -> float:
    """The line's allowance: of the events beside its pairs where taken, else the takes'."""
    events = line.get(f"events_beside_{calls}_us") or line["events_us"]
    return max(GOAL_REL * events, GOAL_US)


def floor_markdown(report: dict[str, Any]) -> str:
    calls = report["calls"]
    lines = [
        f"# The harness's floor ({report['world_size']} ranks, {report['environment']['gpu']})",
        "",
        f"Slowest rank per call, us. Events: back-to-back calls ({report['iters']} after "
        f"{report['warmup']}) between two CUDA events, in a process of the floor's own on the "
        "runners' core. 'Takes' are the median over "
        f"{report.get('bursts', 1)} bursts (each after a {report['burst_gap_s'] * 1000:g} ms "
        f"pause), taken before and after each of the {report.get('repeats', 1)} evaluator "
        "passes; 'beside' is one burst taken right after each of the evaluator's pairs, "
        "while its runners wait (the median over them). The evaluator's lines: the median "
        "per-call time of its candidate rounds, on the judge's clock, at "
        f"{', '.join(map(str, calls))} calls per round, net of the harness (the quickest "
        "tare of the case: the same round around a call that returns at once, shown as "
        "'harness'). The gap is the median over every pair of its net time less the burst "
        f"beside it, with the median's {GAP_CONFIDENCE:.0%} interval; 'vs takes' holds each "
        "pass against the mean of the takes around it instead (every take, pair and burst "
        f"in floor.json). Goal: within {GOAL_REL:.0%} of the events, or {GOAL_US:g} us; "
        "'within noise' where the interval holds it."
        + ("" if report.get("decided", True) else " Passes stopped at the cap undecided."),
        "",
        *_one_rank_note(report["world_size"]),
        "| solution | elements | events, takes | events, fresh inputs | "
        + " | ".join(
            f"evaluator, {c} calls a round | events beside | - events beside (pairs) | goal "
            "| vs takes | harness"
            for c in calls
        )
        + " |",
        "|---|---|---|---|" + "---|---|---|---|---|---|" * len(calls),
    ]
    for line in report["lines"]:
        takes = " / ".join(_us(t) for t in line.get("events_takes_us", []))
        events = _us(line["events_us"]) + (f" ({takes})" if takes else "")
        cells = [line["solution"], str(line["n"]), events, _us(line["fresh_us"])]
        for c in calls:
            gap, span = line.get(f"gap_{c}_us"), line.get(f"gap_{c}_interval_us")
            gaps = "-" if gap is None else f"{gap:+.1f}"
            gaps += (
                f" ({span[0]:+.1f} to {span[1]:+.1f}, {line.get(f'gap_{c}_pairs')})" if span else ""
            )
            takes_gap = line.get(f"gap_takes_{c}_us")
            cells += [
                _us(line.get(f"evaluator_{c}_us")),
                _us(line.get(f"events_beside_{c}_us")),
                gaps,
                verdict(line, c),
                "-" if takes_gap is None else f"{takes_gap:+.1f}",
                _us(line.get(f"harness_{c}_us")),
            ]
        lines.append("| " + " | ".join(cells) + " |")
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
