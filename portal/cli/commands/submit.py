"""`pkb submit`: a bundle in one of the site's modes (on a profile, a case to profile), or
an entry's samples as one batch; with --wait, followed until they are evaluated."""

from __future__ import annotations

import argparse
from pathlib import Path

from portal.cli.client import ApiError, Client
from portal.cli.commands import common, entries
from portal.cli.commands.common import EXIT_FAILED, EXIT_OK, UsageError, err, plain
from portal.cli.commands.submissions import follow, report, run_label

# The site's modes (Submission.Mode), spelled out: pkb imports no Django.
MODES = {
    "test": "dev cases, correctness only, no timing; fast; never ranked",
    "benchmark": "the full judging, shown to your team only; never ranked",
    "ranked": "the full judging; counts on the boards (the default)",
    "profile": "one case judged under the profiler, traces for your team (`pkb download`)",
}


def cmd_submit(args: argparse.Namespace) -> int:
    if args.entry or args.samples:
        return cmd_submit_samples(args)
    bundle = Path(args.bundle)
    if not bundle.is_file():
        raise UsageError(f"{bundle}: no such file")
    if args.case and args.mode != "profile":
        raise UsageError("--case names the case to profile: it goes with --mode profile")
    client = common.client(args, need_token=True)
    created = client.submit(
        bundle, mode=args.mode, profile=args.profile or "", profile_case=args.case or ""
    )
    err().print(
        f"Submitted #{created['id']} for {created['team']}: {run_label(created)}, "
        f"{len(created['problems'])} problem(s), {created['status']}. {created['html_url']}"
    )
    if created.get("notice"):
        err().print(plain(created["notice"]))
    if not args.wait:
        return EXIT_OK
    return report(follow(client, created["id"], poll=args.poll))


def cmd_submit_samples(args: argparse.Namespace) -> int:
    """A batch of an entry's samples, one bundle each: sent at once, all kept or none."""
    if not (args.entry and args.samples) or args.bundle:
        raise UsageError("--entry NAME and --samples DIR go together, without a bundle")
    try:
        samples = entries.read_samples(Path(args.samples))
    except (entries.SamplesError, OSError) as exc:
        raise UsageError(str(exc)) from None
    client = common.client(args, need_token=True)
    batch = entries.submit_samples(client, args.entry, samples)
    err().print(
        f"Sent batch {batch['batch']} of entry {args.entry}: {len(batch['samples'])} sample(s), "
        f"{sum(len(s['problems']) for s in batch['samples'])} attempt(s) queued."
    )
    if not args.wait:
        entries.print_status(batch, as_json=args.json)
        return EXIT_OK
    batch = _follow_batch(client, args.entry, batch["batch"], poll=args.poll)
    entries.print_status(batch, as_json=args.json)
    return _batch_outcome(batch)


def _batch_outcome(batch: dict) -> int:
    """As for a bundle: 1 unless every attempt of every sample passed unflagged (a wrong
    answer of one sample is a failed problem, issue 40)."""
    attempts = [a for sample in batch["samples"] for a in sample["attempts"]]
    ok = bool(attempts) and all(a["outcome"] == "passed" for a in attempts)
    return EXIT_OK if ok else EXIT_FAILED


def _follow_batch(client: Client, entry: str, batch: int, *, poll: float) -> dict:
    """Poll until no sample of the batch is queued or running, waiting out 429s."""
    while True:
        try:
            status = entries.entry_status(client, entry, batch=batch)
        except ApiError as exc:
            common.back_off(exc)
            continue
        err().print(entries.summary(status))
        if status["finished"]:
            return status
        common.sleep(poll)
