"""The floor's table (`evaluator.tools.floor`): its lines read against the goal, and
written out as markdown. Reading only: the measuring is floor.py's."""

from __future__ import annotations

from typing import Any

# The goal for the harness: within 15% of the events, or 5 us, whichever is larger.
GOAL_REL, GOAL_US = 0.15, 5.0
# A line's interval for its median gap over the passes (judge/stats.median_interval): at
# under six passes the range of their gaps, which holds the median with 1 - 2^(1-n).
GAP_CONFIDENCE = 0.95


def verdict(line: dict[str, Any], calls: int) -> str:
    """Whether a line meets the goal: on the median gap over the passes, "within noise"
    where the gap's interval straddles the goal. A launch-bound line's passes moved by
    +-20 us with the host's speed on one H100 (docs/measurements/
    2026-11-26-both-sides-stopped.md): a median alone would read met or not by chance."""
    gap = line.get(f"gap_{calls}_us")
    if gap is None:
        return "NOT met"
    said = "met" if gap <= goal(line) else "NOT met"
    return said if decided(line, calls) else f"{said}, within noise"


def decided(line: dict[str, Any], calls: int) -> bool:
    """Whether the line's gap interval lies wholly on one side of the goal (a line without
    an evaluator reading is decided: more passes would not give it one)."""
    gap = line.get(f"gap_{calls}_us")
    if gap is None:
        return True
    low, high = line.get(f"gap_{calls}_interval_us") or (gap, gap)
    return not low <= goal(line) < high


def goal(line: dict[str, Any]) -> float:
    return max(GOAL_REL * line["events_us"], GOAL_US)


def floor_markdown(report: dict[str, Any]) -> str:
    calls = report["calls"]
    lines = [
        f"# The harness's floor ({report['world_size']} ranks, {report['environment']['gpu']})",
        "",
        f"Slowest rank per call, us: events are the median over {report.get('bursts', 1)} "
        f"bursts of {report['iters']} back-to-back calls (each after {report['warmup']} calls "
        f"and a {report['burst_gap_s'] * 1000:g} ms pause), on the runners' core; the "
        "evaluator's lines the median per-call time of its candidate rounds, on the judge's "
        f"clock, at {', '.join(map(str, calls))} calls per round, net of the harness (the quickest "
        "tare of the case: the same round around a call that returns at once, shown as "
        f"'harness'). The evaluator ran {report.get('repeats', 1)} times, each time between "
        "two takes of the events; each pass is held against the mean of the takes around "
        "it, and the table shows the medians over the passes (every take and pass in "
        f"floor.json) and the gap's {GAP_CONFIDENCE:.0%} interval (below six passes the "
        "range of their gaps). Goal: within "
        f"{GOAL_REL:.0%} of the events, or {GOAL_US:g} us; 'within noise' where the "
        "interval holds it."
        + ("" if report.get("decided", True) else " Passes stopped at the cap undecided."),
        "",
        *_one_rank_note(report["world_size"]),
        "| solution | elements | events, back to back (takes) | events, fresh inputs | "
        + " | ".join(
            f"evaluator, {c} calls a round | - events (passes) | goal | harness" for c in calls
        )
        + " |",
        "|---|---|---|---|" + "---|---|---|---|" * len(calls),
    ]
    for line in report["lines"]:
        takes = " / ".join(_us(t) for t in line.get("events_takes_us", []))
        events = _us(line["events_us"]) + (f" ({takes})" if takes else "")
        cells = [line["solution"], str(line["n"]), events, _us(line["fresh_us"])]
        for c in calls:
            got, gap = line.get(f"evaluator_{c}_us"), line.get(f"gap_{c}_us")
            span = line.get(f"gap_{c}_interval_us")
            gaps = "-" if gap is None else f"{gap:+.1f}"
            gaps += f" ({span[0]:+.1f} to {span[1]:+.1f})" if span else ""
            cells += [_us(got), gaps, verdict(line, c), _us(line.get(f"harness_{c}_us"))]
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
