"""The floor's table (`evaluator.tools.floor`): its lines read against the goal, and
written out as markdown. Reading only: the measuring is floor.py's."""

from __future__ import annotations

from typing import Any

# The goal for the harness: within 15% of the events, or 5 us, whichever is larger.
GOAL_REL, GOAL_US = 0.15, 5.0


def verdict(line: dict[str, Any], calls: int) -> str:
    """Whether a line meets the goal: on the median gap over the passes, "within noise"
    where the passes' range of gaps straddles the goal (the range holds the median with
    probability 1 - 2^(1-n): 94% at five passes). A launch-bound line's passes moved by
    +-20 us with the host's speed on one H100 (docs/measurements/
    2026-11-26-both-sides-stopped.md): a median alone would read met or not by chance."""
    gap = line.get(f"gap_{calls}_us")
    if gap is None:
        return "NOT met"
    goal = max(GOAL_REL * line["events_us"], GOAL_US)
    said = "met" if gap <= goal else "NOT met"
    low, high = line.get(f"gap_{calls}_range_us") or (gap, gap)
    return f"{said}, within noise" if low <= goal < high else said


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
        "floor.json) and the range of the passes' gaps. Goal: within "
        f"{GOAL_REL:.0%} of the events, or {GOAL_US:g} us; 'within noise' where the "
        "passes' gaps fall on both sides of it.",
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
            span = line.get(f"gap_{c}_range_us")
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
