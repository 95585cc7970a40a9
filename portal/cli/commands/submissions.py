"""A submission once sent: `pkb status` and `pkb cancel`, the report printed for it, and
following it (`pkb submit --wait`) until it is evaluated."""

from __future__ import annotations

import argparse

from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from portal.cli.client import ApiError, Client
from portal.cli.commands import common
from portal.cli.commands.common import (
    CUT,
    EXIT_FAILED,
    EXIT_OK,
    FINISHED,
    TRACE_HELP,
    err,
    fmt,
    out,
    plain,
    speedup,
)
from portal.formats import duration_us, file_size

# What `pkb status` says of a run that has judged nothing yet, as the page says it.
STAGES = {
    "queued": "queued: waiting for a host of its profile",
    "starting": "starting: each solution is compiled next, then judged",
    "compiling": "compiling: each solution is imported once, in parallel, before anything is timed",
}


def cmd_status(args: argparse.Namespace) -> int:
    client = common.client(args, need_token=True)
    return report(client.get(f"submissions/{args.id}/"))


def cmd_cancel(args: argparse.Namespace) -> int:
    client = common.client(args, need_token=True)
    cancelled = client.post(f"submissions/{args.id}/cancel/")
    err().print(f"Submission #{cancelled['id']}: {cancelled['status']}.")
    return EXIT_OK


def run_label(submission: dict) -> str:
    """ "a benchmark run on h200x4"; an older site sends no mode: its runs are ranked."""
    mode = submission.get("mode") or "ranked"
    return f"a {mode} run on {submission['profile']}"


def _results_table(submission: dict) -> Table:
    table = common.table("problem", "status", "speedup", "time", "reference", "roofline", "message")
    for r in submission["results"]:
        status = r["status"].replace("_", " ") + (" (flagged)" if r.get("flagged") else "")
        table.add_row(
            r["problem"],
            status,
            speedup(r),
            duration_us(r["time_us"]),
            duration_us(r["ref_time_us"]),
            fmt(r["roofline"], ".0%"),
            plain((r["message"] or "").splitlines()[0][:120]) if r["message"] else "",
        )
    return table


def _outcome(submission: dict) -> int:
    """1 unless the submission finished and every problem of it passed unflagged."""
    if submission["status"] not in FINISHED:
        return EXIT_OK  # still going: nothing has failed yet
    passed = {r["problem"] for r in submission["results"] if r["status"] == "passed"}
    flagged = {r["problem"] for r in submission["results"] if r.get("flagged")}
    ok = submission["status"] == "done" and set(submission["problems"]) <= passed - flagged
    ok = ok and not submission.get("disqualified")
    return EXIT_OK if ok else EXIT_FAILED


def _artifacts_table(submission: dict) -> Table:
    title = f"Artifacts (save them with: pkb download {submission['id']})"
    table = common.table("artifact", "size", "note", title=title)
    for a in submission["artifacts"]:
        size = file_size(a["size"]) + (CUT if a["truncated"] else "")
        name = a["name"] if a.get("url") else f"{a['name']} (file deleted)"
        table.add_row(plain(name), size, plain(a.get("note") or ""))
    return table


def _headline(submission: dict) -> str:
    line = (
        f"Submission #{submission['id']} ({submission['bundle_name']}, "
        f"{run_label(submission)}): {submission['status']}"
    )
    if submission.get("reason"):
        line += f": {plain(submission['reason'])}"
    if submission.get("platform_fault"):
        line += " (the platform's fault, not the bundle's: it does not count against the quota)"
    if submission.get("disqualified"):
        line += f" (disqualified: {submission.get('disqualification_reason') or 'see the site'})"
    return line


def report(submission: dict) -> int:
    """Print the submission's state, results and artifacts; its exit code."""
    console = out()
    console.print(_headline(submission))
    if submission["results"]:
        console.print(_results_table(submission))
    elif submission["status"] not in FINISHED:
        stage, count = stage_of(submission)
        console.print(f"{count} problems judged" if count else STAGES.get(stage, stage))
    if submission.get("artifacts"):
        console.print(_artifacts_table(submission))
        if any(a["name"].endswith(".trace.json") for a in submission["artifacts"]):
            console.print(TRACE_HELP)
    console.print(submission["html_url"])
    return _outcome(submission)


def stage_of(submission: dict) -> tuple[str, str]:
    """What the run does now, and its count of problems judged once there is one. A run
    its host has not reported on, or one compiling, has judged nothing yet: its count
    read "0/8" before it said it compiled (issue 40). An older site sends no phase."""
    status, total = submission["status"], submission["progress_total"]
    if status != "running":
        return status, ""
    if submission.get("progress_phase") == "compiling":
        return "compiling", ""
    if not total:
        return "starting", ""
    return "judging", f"{submission['progress_done']}/{total}"


def _poll(client: Client, sid: int) -> dict:
    """The submission, waiting out a 429 rather than giving up on a long evaluation."""
    while True:
        try:
            return client.get(f"submissions/{sid}/")
        except ApiError as exc:
            common.back_off(exc)


def follow(client: Client, sid: int, *, poll: float) -> dict:
    """Poll until the submission is finished, with a bar of problems done out of total."""
    columns = (
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        TextColumn("{task.fields[count]}"),
        TextColumn("{task.fields[current]}"),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=err(), transient=False) as progress:
        task = progress.add_task("queued", total=None, current="", count="")
        while True:
            submission = _poll(client, sid)
            stage, count = stage_of(submission)
            # No total until the host counts: the bar pulses instead of reading 0 of 8.
            total = submission["progress_total"] if count else None
            progress.update(
                task,
                description=stage,
                total=total,
                completed=submission["progress_done"],
                current=submission["current_problem"],
                count=count,
            )
            if submission["status"] in FINISHED:
                if submission["status"] == "done":
                    total = submission["progress_total"] or len(submission["problems"])
                    progress.update(
                        task, total=total, completed=total, current="", count=f"{total}/{total}"
                    )
                return submission
            common.sleep(poll)
