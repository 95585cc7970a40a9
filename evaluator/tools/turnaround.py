"""`python -m evaluator.tools.turnaround BUNDLE`: where the time of one evaluation goes.

    python -m evaluator.tools.turnaround BUNDLE [--world-size 2] [--mode test]
                                                [--profile cpu] [--cases dev]

Judges BUNDLE once on this machine as a worker would (`evaluator.host.run`, without the
broker: each message the host would send is kept here with the time it was sent) and
prints each phase in seconds: this process's imports, the request and bundle checks, the
sandbox's start, the compile pass, the pools' start, the judging of each problem, the
teardown and the recording of the finished message. The sandbox's, the compile pass's
and the pools' seconds are the evaluator's own records (the finished message's
environment: `sandbox_start_s`, `compile_s`, `pool_starts_s`); the rest are the times
between messages. The pools start inside the first problem that needs them: that
problem's line leaves them out. Recording here is the finished message encoded and read
back as the portal's task first reads it; the portal's database write is not included.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

BEGAN = time.monotonic()  # before the heavy imports, which are a phase too

Sent = tuple[float, float, str, dict[str, Any]]  # (sent, done, task name, message)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m evaluator.tools.turnaround")
    parser.add_argument("bundle", type=Path, help="a .zip, a .tar.gz or a folder")
    parser.add_argument("--world-size", type=int, default=None)
    parser.add_argument("--mode", default="test", help="test, benchmark, ranked or profile")
    parser.add_argument("--profile", default=None, help="a hardware profile (default: host's)")
    parser.add_argument("--cases", choices=["dev", "eval"], default=None)
    args = parser.parse_args(argv)

    from evaluator.__main__ import with_profile, zip_folder
    from evaluator.contract import FINISHED_TASK, EvaluationRequest, Mode, read_message
    from evaluator.host.profiles import get_profile
    from evaluator.host.run import run_evaluation
    from evaluator.host.settings import load_settings
    from evaluator.intake.bundle import read_bundle
    from problems.registry import all_problems

    imported = time.monotonic()
    settings = load_settings(with_profile(args.profile))
    profile = get_profile(settings.profile)
    if args.world_size:
        profile = dataclasses.replace(profile, world_size=args.world_size)
    if args.cases:
        profile = dataclasses.replace(profile, case_kind=args.cases)
    data = zip_folder(args.bundle) if args.bundle.is_dir() else args.bundle.read_bytes()
    slugs = sorted(
        read_bundle(args.bundle.name, data, known_slugs=[p.slug for p in all_problems()]).solutions
    )
    request = EvaluationRequest.build(
        evaluation_id=f"turnaround-{uuid.uuid4()}",
        submission_id=0,
        profile=profile.name,
        bundle_name=args.bundle.name,
        bundle=data,
        problems=slugs,
        mode=Mode(args.mode),
    ).to_json()
    sent: list[Sent] = []

    def send(name: str, message: dict[str, Any]) -> None:
        at = time.monotonic()
        if name == FINISHED_TASK:  # what the broker and the portal's task do with it first
            read_message(json.loads(json.dumps(message)), "evaluation finished", ("results",))
        sent.append((at, time.monotonic(), name, message))

    requested = time.monotonic()
    run_evaluation(request, settings=settings, send=send, profile=profile)
    rows = phases(sent, began=BEGAN, imported=imported, requested=requested)
    print(table(rows))
    finished = sent[-1][3] if sent else {}
    # What each problem came to: a phase of 0.00 s is a problem that was not judged.
    for result in finished.get("results") or []:
        why = str(result.get("message") or "").splitlines()[:1]
        print(
            f"{result.get('slug')}: {result.get('status')}" + (f" ({why[0][:160]})" if why else "")
        )
    if finished.get("outcome") != "done":
        print(f"\nthe evaluation failed: {finished.get('reason', '?')}", file=sys.stderr)
        return 1
    return 0


def phases(
    sent: list[Sent], *, began: float, imported: float, requested: float
) -> list[tuple[str, float]]:
    """(phase, seconds) of one evaluation from the messages it sent, in order."""
    from evaluator.contract import FINISHED_TASK, PROGRESS_TASK

    progress = [(at, m) for at, _, name, m in sent if name == PROGRESS_TASK]
    compiling = next(at for at, m in progress if m.get("phase") == "compiling")
    judging = [(at, m["current"]) for at, m in progress if m.get("phase") != "compiling"]
    finished_at, recorded_at, _, finished = next(s for s in sent if s[2] == FINISHED_TASK)
    environment = finished.get("environment", {})
    sandbox_s = float(environment.get("sandbox_start_s", 0.0))
    compile_s = float(environment.get("compile_s", 0.0))
    starts = [float(s) for s in environment.get("pool_starts_s", [])]
    first_judged = judging[0][0] if judging else finished_at
    rows = [
        ("imports (torch, evaluator)", imported - began),
        ("request read, bundle checked", compiling - requested),
        ("sandbox start", sandbox_s),
        ("compile pass", compile_s),
        # Rounding of the recorded seconds may leave a hair below zero.
        (
            "peer bandwidth probe, set-up",
            max(0.0, first_judged - compiling - sandbox_s - compile_s),
        ),
        ("pool start", starts[0] if starts else 0.0),
    ]
    left_out = starts[0] if starts else 0.0
    for (at, slug), (after, _) in zip(judging, judging[1:], strict=False):
        rows.append((f"judging {slug}", after - at - left_out))
        left_out = 0.0
    if len(starts) > 1:
        rows.append((f"pool restarts ({len(starts) - 1}, inside the judging)", sum(starts[1:])))
    last = judging[-1][0] if judging else first_judged
    rows.append(("teardown (ranks, sandbox, scratch)", finished_at - last))
    rows.append(("recording (finished message)", recorded_at - finished_at))
    rows.append(("total", recorded_at - began))
    return rows


def table(rows: list[tuple[str, float]], fmt: Callable[[float], str] = "{:8.2f} s".format) -> str:
    width = max(len(name) for name, _ in rows)
    return "\n".join(f"{name.ljust(width)}  {fmt(seconds)}" for name, seconds in rows)


if __name__ == "__main__":
    sys.exit(main())
