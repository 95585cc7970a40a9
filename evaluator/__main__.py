"""`python -m evaluator check BUNDLE`: judge a bundle on this machine, as a host would.

    python -m evaluator check BUNDLE [--world-size 2] [--profile cpu] [--cases dev] [--logs]
                                     [--mode test|profile [--profile-case NAME] [--out DIR]]
        BUNDLE: a .zip, a .tar.gz, or a folder (zipped in memory first)
        --mode test: the dev cases' correctness only; --mode profile: that, then one dev
        case per problem profiled on every rank, its traces and summaries written to --out
    python -m evaluator worker              (the pkb-worker Celery worker)

`check` exits 0 when every problem of the bundle passed, 1 when one did not, 2 when the
bundle was rejected before anything ran.
"""

from __future__ import annotations

import argparse
import dataclasses
import io
import logging
import os
import sys
import uuid
import zipfile
from pathlib import Path

from evaluator.contract import Artifact, Mode, ProblemResult, ProblemStatus
from evaluator.host.profiles import PROFILES, get_profile
from evaluator.host.settings import SettingsError, load_settings
from evaluator.intake.bundle import BundleError, read_bundle
from evaluator.judge.evaluate import evaluate_bundle
from evaluator.judge.profiling import ProfileCaseError
from problems.registry import all_problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m evaluator")
    commands = parser.add_subparsers(dest="command", required=True)
    check = commands.add_parser("check", help="validate a bundle and run it locally")
    check.add_argument("bundle", type=Path, help="a .zip, a .tar.gz or a folder")
    check.add_argument("--profile", choices=sorted(PROFILES), default=None)
    check.add_argument("--world-size", type=int, default=None)
    check.add_argument("--cases", choices=["dev", "eval"], default=None)
    check.add_argument("--logs", action="store_true", help="print each problem's log")
    check.add_argument("--mode", choices=[m.value for m in Mode], default=Mode.RANKED.value)
    check.add_argument("--profile-case", default="", help="the dev case to profile")
    check.add_argument("--out", type=Path, default=Path("profiles"), help="for the artifacts")
    commands.add_parser("worker", help="run the Celery worker of this host's profile")
    args = parser.parse_args(argv)

    if args.command == "worker":
        from evaluator.host.tasks import main as worker_main

        worker_main()
        return 0
    return _check(args)


def with_profile(profile: str | None) -> dict[str, str]:
    """The environment, with --profile in place of PKB_PROFILE: a profile brings its own
    timing defaults (GPU profiles warm up and iterate more than CPU ones)."""
    env = dict(os.environ)
    if profile:
        env["PKB_PROFILE"] = profile
    return env


def _check(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(message)s")
    try:
        settings = load_settings(with_profile(args.profile))
    except SettingsError as exc:
        print(f"bad setting: {exc}", file=sys.stderr)
        return 2
    profile = get_profile(settings.profile)
    if args.world_size:
        profile = dataclasses.replace(profile, world_size=args.world_size)
    if args.cases:
        profile = dataclasses.replace(profile, case_kind=args.cases)
    try:
        data = zip_folder(args.bundle) if args.bundle.is_dir() else args.bundle.read_bytes()
        slugs = [p.slug for p in all_problems()]
        bundle = read_bundle(args.bundle.name, data, known_slugs=slugs)
    except (OSError, BundleError) as exc:
        print(f"bundle rejected: {exc}", file=sys.stderr)
        return 2

    def progress(done: int, total: int, current: str) -> None:
        if current:
            print(f"[{done + 1}/{total}] {current} ...", file=sys.stderr, flush=True)

    artifacts: list[Artifact] = []
    try:
        results, environment = evaluate_bundle(
            bundle,
            slugs=sorted(bundle.solutions),
            profile=profile,
            settings=settings,
            evaluation_id=f"local-{uuid.uuid4()}",
            on_progress=progress,
            mode=Mode(args.mode),
            profile_case=args.profile_case,
            on_artifact=artifacts.append,
        )
    except ProfileCaseError as exc:
        print(f"refused: {exc}", file=sys.stderr)
        return 2
    print(_table(results))
    for result in results:
        for f in result.review:  # what the portal would hold for an admin before ranking
            print(f"{result.slug}: under review: {f['rule']} at {f['path']}:{f['line']}")
    _write(artifacts, args.out)
    print(
        f"\n{profile.world_size} ranks over {environment['backend']}, {profile.case_kind} cases, "
        f"torch {environment['torch']} on {environment['hostname']}; "
        f"compile pass {environment.get('compile_s', 0):.1f} s"
    )
    bandwidth = environment.get("peer_bandwidth_gbps")
    if bandwidth:
        print(
            f"peer bandwidth per GPU: {bandwidth['one_peer']:.0f} GB/s to one peer, "
            f"{bandwidth['all_peers']:.0f} GB/s to all peers; floors use {bandwidth['used']:.0f}"
        )
    if args.logs:
        for result in results:
            if result.log:
                print(f"\n=== {result.slug} log ===\n{result.log}")
    return 0 if all(r.status == ProblemStatus.PASSED for r in results) else 1


def _write(artifacts: list[Artifact], folder: Path) -> None:
    if artifacts:
        folder.mkdir(parents=True, exist_ok=True)
    for artifact in artifacts:
        (folder / artifact.name).write_bytes(artifact.data())
        print(f"wrote {folder / artifact.name}{' (cut)' if artifact.truncated else ''}")


def zip_folder(folder: Path) -> bytes:
    """A folder of sources as the .zip a team would upload (symlinks left out)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(folder.rglob("*")):
            if path.is_file() and not path.is_symlink():
                archive.write(path, path.relative_to(folder).as_posix())
    return buf.getvalue()


def _table(results: list[ProblemResult]) -> str:
    rows = [("problem", "status", "time", "reference", "speedup", "roofline", "message")]
    for r in results:
        status = str(r.status) + "".join(f" [{flag}]" for flag in r.flags)
        rows.append(
            (
                r.slug,
                status,
                _us(r.time_us),
                _us(r.ref_time_us),
                _speedup(r),
                f"{100 * r.roofline:.0f}%" if r.roofline is not None else "-",
                r.message.splitlines()[0][:100] if r.message else "",
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    return "\n".join(
        "  ".join(
            [*(cell.ljust(w) for cell, w in zip(row, widths, strict=False)), row[-1]]
        ).rstrip()
        for row in rows
    )


def _speedup(r: ProblemResult) -> str:
    if not r.speedup:
        return "-"
    if r.speedup_low is None or r.speedup_high is None:
        return f"{r.speedup:.2f}x"
    return f"{r.speedup:.2f}x ({r.speedup_low:.2f}-{r.speedup_high:.2f})"


def _us(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value / 1000:.2f} ms" if value >= 1000 else f"{value:.1f} us"


if __name__ == "__main__":
    sys.exit(main())
