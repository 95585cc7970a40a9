"""A profile run's summary per problem, as Markdown for people and CSV for scripts.

The times per call come from the judges' clock (trusted); the tables from the ranks'
traces, which bundle code could have forged (they mislead only its own team). Names from
a trace are cut, stripped of control characters and put in code spans (Markdown) or
kept from reading as spreadsheet formulas (CSV).
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass, field

from evaluator.contract import Artifact, printable, spreadsheet_safe
from evaluator.judge.stats import NET_FLOOR
from evaluator.judge.traces import COMMUNICATION_WORDS, RankSummary, Row
from problems.spec import Case

NAME_CHARS = 120


@dataclass
class Profiled:
    """What one problem's profile measured, for its summary."""

    slug: str
    case: Case
    world_size: int
    backend: str
    calls: int
    bytes_moved: int
    bandwidth_gbps: float | None
    # The timed pair's seconds (the slowest rank's): reference, candidate, tare; calls.
    times: tuple[float, float, float, int]
    trace_errors: dict[int, str] = field(default_factory=dict)  # rank -> the runner's word
    summaries: dict[int, RankSummary] = field(default_factory=dict)
    notes: dict[int, str] = field(default_factory=dict)  # rank -> what became of its trace


OPENING = (
    "Open a `{slug}.rank<r>.trace.json` in Perfetto's UI (https://ui.perfetto.dev, "
    '"Open trace file": the file is read in your browser, nothing is uploaded) or in '
    'Chrome at chrome://tracing ("Load"). Each call of your `solution` is the range '
    "`pkb.solution`; each rank's trace is its own process's timeline."
)
RULE = (
    "Communication: a kernel or operator whose name, in lower case and without "
    "underscores, contains one of "
    + ", ".join(f"`{word}`" for word in COMMUNICATION_WORDS)
    + " (NCCL, gloo, c10d, symmetric memory, NVSHMEM, and anything named after a "
    "collective: name your own kernels so and they count); everything else is compute."
)


def summary_artifacts(profiled: Profiled) -> list[Artifact]:
    slug = profiled.slug
    note = f"case {profiled.case.name}, {profiled.world_size} ranks; not a score"
    return [
        Artifact.build(
            name=f"{slug}.summary.md",
            media_type="text/markdown",
            data=markdown(profiled).encode(),
            note=note,
        ),
        Artifact.build(
            name=f"{slug}.summary.csv", media_type="text/csv", data=table(profiled), note=note
        ),
    ]


def markdown(profiled: Profiled) -> str:
    case = profiled.case
    params = ", ".join(f"{k}={v}" for k, v in case.params.items())
    lines = [
        f"# Profile of {profiled.slug}, case {case.name}",
        "",
        f"{case.dtype}, {params}; {profiled.world_size} ranks over {profiled.backend}. "
        "A profile run: its times are not a score and never ranked.",
        "",
        *_times(profiled),
        *_balance(profiled),
    ]
    for rank, summary in sorted(profiled.summaries.items()):
        lines += _top(rank, summary)
    lines += ["## Opening a trace", "", OPENING.format(slug=profiled.slug), ""]
    return "\n".join(lines)


def _times(profiled: Profiled) -> list[str]:
    reference_s, candidate_s, tare_s, calls = profiled.times
    rows = [
        _time_row("your solution", _net(candidate_s, tare_s, calls), profiled),
        _time_row("reference", _net(reference_s, tare_s, calls), profiled),
    ]
    peer = (
        f"{profiled.bandwidth_gbps:.0f} GB/s, measured by this host"
        if profiled.bandwidth_gbps
        else "not measured on this host (CPU ranks or one rank have no links to measure)"
    )
    return [
        "## Time per call",
        "",
        f"The judges' clock, in one pair of rounds of {calls} calls without the profiler: "
        "the slowest rank, net of the harness's own time, as judged runs count it. "
        "Achieved: the bytes each rank must move (the problem's byte model) over that "
        f"time. Peer bandwidth: {peer}.",
        "",
        "| | per call | bytes per rank | achieved | of the peer bandwidth |",
        "|---|---|---|---|---|",
        *rows,
        "",
    ]


def _net(gross_s: float, tare_s: float, calls: int) -> float:
    """Seconds per call net of the tare, never below NET_FLOOR of the gross (stats.py)."""
    return max(gross_s - tare_s, NET_FLOOR * gross_s) / max(1, calls)


def _time_row(who: str, seconds: float, profiled: Profiled) -> str:
    rate = profiled.bytes_moved / seconds if seconds > 0 else 0.0
    share = (
        f"{100 * rate / (profiled.bandwidth_gbps * 1e9):.1f}%"
        if profiled.bandwidth_gbps and rate
        else "-"
    )
    moved, achieved = _bytes(profiled.bytes_moved), _bytes(rate) + "/s"
    return f"| {who} | {_duration(seconds * 1e6)} | {moved} | {achieved} | {share} |"


def _balance(profiled: Profiled) -> list[str]:
    lines = [
        "## Communication and compute, per rank",
        "",
        RULE + " Sums of durations: device time of kernels and copies where the trace has "
        "them, else the self time of CPU operators (a parent's time less its children's); "
        "work that overlaps (streams, threads) is counted in each.",
        "",
        "| rank | communication | compute | communication share | calls marked | trace |",
        "|---|---|---|---|---|---|",
    ]
    for rank in range(profiled.world_size):
        note = _cell(profiled.notes.get(rank, "no trace"))
        summary = profiled.summaries.get(rank)
        if summary is None:
            lines.append(f"| {rank} | - | - | - | - | {note} |")
            continue
        busy = summary.communication_us + summary.compute_us
        share = f"{100 * summary.communication_us / busy:.0f}%" if busy else "-"
        lines.append(
            f"| {rank} | {_duration(summary.communication_us)} | "
            f"{_duration(summary.compute_us)} | {share} | {summary.calls} | {note} |"
        )
    return [*lines, ""]


def _top(rank: int, summary: RankSummary) -> list[str]:
    kind = "kernel" if summary.device else "CPU operator"
    title = "by device time" if summary.device else "by self time"
    busy = summary.communication_us + summary.compute_us
    lines = [
        f"## Top {kind}s {title}, rank {rank}",
        "",
        f"| {kind} | {'launches' if summary.device else 'calls'} | total | each | share | "
        "communication |",
        "|---|---|---|---|---|---|",
    ]
    for row in summary.top:
        share = f"{100 * row.total_us / busy:.1f}%" if busy else "-"
        name = _cell(row.name).replace("`", "'")
        lines.append(
            f"| `{name}` | {row.calls} | "
            f"{_duration(row.total_us)} | {_duration(row.total_us / max(1, row.calls))} | "
            f"{share} | {'yes' if row.communication else 'no'} |"
        )
    if len(summary.rows) > len(summary.top):
        lines.append(f"\n{len(summary.rows) - len(summary.top)} more in the trace.")
    return [*lines, ""]


def table(profiled: Profiled) -> bytes:
    """Each rank's top rows: rank, kind, name, calls, total_us, mean_us, communication."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["rank", "kind", "name", "calls", "total_us", "mean_us", "communication"])
    for rank, summary in sorted(profiled.summaries.items()):
        kind = "kernel" if summary.device else "cpu_op"
        for row in summary.top:
            writer.writerow([rank, kind, _csv_name(row), row.calls, *_numbers(row)])
    return out.getvalue().encode()


def _numbers(row: Row) -> list[str]:
    mean = row.total_us / max(1, row.calls)
    return [f"{row.total_us:.3f}", f"{mean:.3f}", "yes" if row.communication else "no"]


def _csv_name(row: Row) -> str:
    return spreadsheet_safe(_cell(row.name))


def _cell(text: str) -> str:
    """Untrusted text for one table cell: printable, one line, no column breaks, cut."""
    flat = printable(text).replace("\n", " ").replace("\t", " ").replace("|", "/")
    return flat if len(flat) <= NAME_CHARS else flat[: NAME_CHARS - 3] + "..."


def _duration(us: float) -> str:
    if us >= 1e6:
        return f"{us / 1e6:.3g} s"
    if us >= 1e3:
        return f"{us / 1e3:.3g} ms"
    return f"{us:.3g} µs"


def _bytes(count: float) -> str:
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if count >= size:
            return f"{count / size:.3g} {unit}"
    return f"{count:.3g} B"
