"""`pkb`: log in with a team token, list problems, submit and follow bundles, read boards.

Exit codes: 0 success; 1 a submission failed or a problem did not pass; 2 bad arguments;
3 the site refused the request or could not be reached.

This module parses the arguments and runs the command; the commands themselves are in
portal/cli/commands/.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence

from portal.cli import config
from portal.cli.client import ApiError
from portal.cli.commands import account, artifacts, boards, entries, submissions
from portal.cli.commands.common import EXIT_ERROR, EXIT_USAGE, POLL_S, UsageError, err
from portal.cli.commands.submit import MODES, cmd_submit


def _positive(text: str) -> float:
    value = float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError("must be positive")
    return value


def _submit_arguments(submit: argparse.ArgumentParser) -> None:
    submit.add_argument(
        "bundle", nargs="?", help="a .zip / .tar.gz of <problem-slug>.py files, or one .py"
    )
    submit.add_argument(
        "--mode", choices=list(MODES), default="ranked", help="what the host does (default ranked)"
    )
    submit.add_argument(
        "--profile", help="hardware profile, e.g. h200x4 (default: the site's; see `pkb profiles`)"
    )
    submit.add_argument(
        "--case", help="with --mode profile: the public case to profile (default: the host picks)"
    )
    submit.add_argument("--entry", help="a model or agent entry's slug: send its --samples")
    submit.add_argument(
        "--samples", help="with --entry: DIR of sample_1/, sample_2/, ... (bundle folders or .zip)"
    )
    submit.add_argument("--json", action="store_true", help="with --entry: the batch as JSON")
    submit.add_argument("--wait", action="store_true", help="follow it until it is evaluated")
    submit.add_argument("--poll", type=_positive, default=POLL_S, help="seconds between checks")
    submit.set_defaults(run=cmd_submit)


def _leaderboard_arguments(board: argparse.ArgumentParser) -> None:
    board.add_argument("--category", help="e.g. collective, tensor, context")
    board.add_argument("--profile", help="hardware profile, e.g. h200x4 (default: the site's)")
    board.add_argument("--problem", help="rank teams on one problem instead")
    board.add_argument("--who", choices=("all", "people", "models"), help="whose rows (all)")
    board.set_defaults(run=boards.cmd_leaderboard)


def _submission_reads(add: Callable[..., argparse.ArgumentParser]) -> list[argparse.ArgumentParser]:
    """profiles, quota, download, status and cancel, added (by `add`) in `pkb --help`'s order."""
    profiles = add(
        "profiles", help="the hardware profiles to submit to, and their workers connected now"
    )
    profiles.set_defaults(run=account.cmd_profiles)
    quota = add("quota", help="your team's runs used per mode, and the next slot")
    quota.set_defaults(run=account.cmd_quota)
    download = add(
        "download", help="save a submission's artifacts (a profile run's traces and tables)"
    )
    download.add_argument("id", type=int)
    download.add_argument("names", nargs="*", help="the artifacts to save (default: all)")
    download.add_argument("--to", default=".", help="the folder to save them in (default: .)")
    download.set_defaults(run=artifacts.cmd_download)
    status = add("status", help="a submission's state and results")
    status.add_argument("id", type=int)
    status.set_defaults(run=submissions.cmd_status)
    cancel = add("cancel", help="cancel a queued or running submission")
    cancel.add_argument("id", type=int)
    cancel.set_defaults(run=submissions.cmd_cancel)
    return [profiles, quota, download, status, cancel]


def _entry_actions(entry: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    """`pkb entry register` and `pkb entry status`: the parsers of its two actions."""
    entry_commands = entry.add_subparsers(dest="entry_command", required=True, metavar="ACTION")
    register = entry_commands.add_parser("register", help="register an entry of your team")
    register.add_argument("name", help="shown on the boards")
    register.add_argument("--slug", help="its name in URLs and --entry (default: from name)")
    register.add_argument("--kind", choices=("model", "agent"), required=True)
    register.add_argument("--model", required=True, help="the model's name")
    register.add_argument("--model-version", help="the model's version")
    register.add_argument("--harness", help="the agent or harness that drove it")
    register.add_argument("--sampling", help="sampling settings, e.g. temperature=0.8")
    register.add_argument("--note", help="free text")
    register.add_argument("--date", help="date of the evaluation, YYYY-MM-DD (default: today)")
    register.add_argument(
        "--samples", type=int, required=True, help="n: samples per problem, fixed from now on"
    )
    register.add_argument("--k", type=int, required=True, help="the k of pass@k (at most n)")
    register.set_defaults(run=entries.cmd_entry_register)
    entry_status = entry_commands.add_parser("status", help="an entry's samples and pass@k")
    entry_status.add_argument("name", help="the entry's slug")
    entry_status.add_argument("--json", action="store_true", help="as JSON, for a harness")
    entry_status.set_defaults(run=entries.cmd_entry_status)
    return [register, entry_status]


def _top() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(
        prog="pkb",
        description="Submit multi-GPU kernels to a pkb leaderboard and follow them.",
        epilog="The site and token come from --url, PKB_URL and PKB_TOKEN, or `pkb login`'s "
        "config file. Exit codes: 0 ok, 1 a submission or problem failed, 2 bad arguments, "
        "3 the site refused the request or could not be reached.",
    )
    top.add_argument("--url", help="the site, e.g. https://kernels.example.org")
    return top


def parser() -> argparse.ArgumentParser:
    top = _top()
    commands = top.add_subparsers(dest="command", required=True, metavar="COMMAND")
    login = commands.add_parser("login", help="check a team API token and store it")
    login.add_argument("--token", help="the token (asked for when not given)")
    login.set_defaults(run=account.cmd_login)
    problems = commands.add_parser("problems", help="list the open problems")
    problems.set_defaults(run=boards.cmd_problems)
    submit = commands.add_parser(
        "submit",
        help="upload a bundle for your team",
        epilog="Modes: " + "; ".join(f"{m}: {text}" for m, text in MODES.items()) + ". Each "
        "mode has its own quota (`pkb quota`).",
    )
    _submit_arguments(submit)
    reads = _submission_reads(commands.add_parser)
    board = commands.add_parser("leaderboard", help="the ranking, overall or per category")
    _leaderboard_arguments(board)
    entry = commands.add_parser("entry", help="model and agent entries: register, status")

    # --url is accepted after the command too (`pkb submit b.zip --url ...`).
    for sub in (login, problems, submit, *reads, board, *_entry_actions(entry)):
        sub.add_argument("--url", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    return top


def main(argv: Sequence[str] | None = None) -> int:
    top = parser()
    args = top.parse_args(argv)
    if args.command == "submit" and not (args.bundle or args.entry or args.samples):
        top.error("submit needs a bundle, or --entry NAME --samples DIR")
    try:
        return args.run(args)
    except UsageError as exc:
        err().print(f"pkb: error: {exc}")
        return EXIT_USAGE
    except (ApiError, config.ConfigError) as exc:
        err().print(f"pkb: error: {exc}")
        return EXIT_ERROR
    except KeyboardInterrupt:
        err().print("pkb: interrupted")
        return 130
