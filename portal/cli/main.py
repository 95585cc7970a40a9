"""`pkb`: log in with a team token, list problems, submit and follow bundles, read boards.

Exit codes: 0 success; 1 a submission failed or a problem did not pass; 2 bad arguments;
3 the site refused the request or could not be reached.
"""

from __future__ import annotations

import argparse
import getpass
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from urllib.parse import quote

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from evaluator.contract import ARTIFACT_CAP_BYTES, printable
from portal.cli import config, entries
from portal.cli.client import ApiError, Client
from portal.formats import duration_us, file_size
from portal.leaderboard.scoring import RULE

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_ERROR = 0, 1, 2, 3
FINISHED = {"done", "failed", "cancelled"}
# The site's modes (Submission.Mode), spelled out: pkb imports no Django.
MODES = {
    "test": "dev cases, correctness only, no timing; fast; never ranked",
    "benchmark": "the full judging, shown to your team only; never ranked",
    "ranked": "the full judging; counts on the boards (the default)",
    "profile": "one case judged under the profiler, traces for your team (`pkb download`)",
}
WEIGHTED = (
    " fast_1 and fast_2 are shares weighted by the problems' weights; solved counts problems."
)
CUT = f" (cut at {ARTIFACT_CAP_BYTES // (1024 * 1024)} MiB by the host: the rest is missing)"
TRACE_HELP = (
    "A .trace.json opens in Perfetto: https://ui.perfetto.dev, then 'Open trace file' (read in "
    "your browser, never uploaded); or in Chrome at chrome://tracing, then 'Load'."
)
POLL_S = 2.0
# Waiting out a 429 while following a submission, at most this long per answer.
MAX_BACKOFF_S = 60.0

# Tests replace it to move the evaluation on between two polls, without waiting.
sleep: Callable[[float], None] = time.sleep


class UsageError(Exception):
    pass


def _out() -> Console:
    return Console(highlight=False, markup=False, soft_wrap=True)


def _err() -> Console:
    return Console(stderr=True, highlight=False, markup=False, soft_wrap=True)


def _client(args: argparse.Namespace, *, need_token: bool = False) -> Client:
    cfg = config.load(url=args.url)
    if need_token and not cfg.token:
        raise ApiError("no token: run `pkb login` (or set PKB_TOKEN)", status=401)
    return Client(cfg.url, cfg.token)


def cmd_login(args: argparse.Namespace) -> int:
    cfg = config.load(url=args.url)
    token = args.token or _ask_token(cfg.url)
    if not token:
        raise UsageError("no token given")
    client = Client(cfg.url, token)
    try:
        me = client.get("me/")
    finally:
        client.close()
    path = config.save(url=cfg.url, token=token)
    team = f" for team {me['team']}" if me.get("team") else " (in no team yet)"
    _err().print(f"Logged in to {cfg.url} as {me['username']}{team}. Token saved in {path}.")
    return EXIT_OK


def _ask_token(url: str) -> str:
    prompt = f"API token for {url} (create one on the site's Team page, under API tokens): "
    if sys.stdin.isatty():
        return getpass.getpass(prompt).strip()
    return sys.stdin.readline().strip()


def cmd_problems(args: argparse.Namespace) -> int:
    client = _client(args)
    problems = client.get("problems/")
    table = Table("slug", "category", "title", "world sizes", box=None)
    for p in problems:
        sizes = ", ".join(str(w) for w in p["world_sizes"])
        table.add_row(p["slug"], p["category"], p["title"], sizes)
    _out().print(table)
    return EXIT_OK


def _fmt(value: float | None, spec: str, suffix: str = "") -> str:
    return "—" if value is None else f"{value:{spec}}{suffix}"


def _speedup(row: dict) -> str:
    """1.84x (1.80–1.88), or 1.84x where the site reports no interval (older results)."""
    text = _fmt(row.get("speedup"), ".2f", "x")
    low, high = row.get("speedup_low"), row.get("speedup_high")
    if row.get("speedup") is None or low is None or high is None:
        return text
    return f"{text} ({low:.2f}–{high:.2f})"


def _plain(text: str) -> str:
    """Text from the site as text: no terminal escapes (results written before the
    evaluator stripped them), no rich markup."""
    return escape(printable(text))


def _results_table(submission: dict) -> Table:
    table = Table("problem", "status", "speedup", "time", "reference", "roofline", "message")
    for r in submission["results"]:
        status = r["status"].replace("_", " ") + (" (flagged)" if r.get("flagged") else "")
        table.add_row(
            r["problem"],
            status,
            _speedup(r),
            duration_us(r["time_us"]),
            duration_us(r["ref_time_us"]),
            _fmt(r["roofline"], ".0%"),
            _plain((r["message"] or "").splitlines()[0][:120]) if r["message"] else "",
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


def _run_label(submission: dict) -> str:
    """ "a benchmark run on h200x4"; an older site sends no mode: its runs are ranked."""
    mode = submission.get("mode") or "ranked"
    return f"a {mode} run on {submission['profile']}"


def _artifacts_table(submission: dict) -> Table:
    title = f"Artifacts (save them with: pkb download {submission['id']})"
    table = Table("artifact", "size", "note", title=title)
    for a in submission["artifacts"]:
        size = file_size(a["size"]) + (CUT if a["truncated"] else "")
        name = a["name"] if a.get("url") else f"{a['name']} (file deleted)"
        table.add_row(_plain(name), size, _plain(a.get("note") or ""))
    return table


def _report(submission: dict) -> int:
    out = _out()
    status = submission["status"]
    line = (
        f"Submission #{submission['id']} ({submission['bundle_name']}, "
        f"{_run_label(submission)}): {status}"
    )
    if submission.get("reason"):
        line += f": {_plain(submission['reason'])}"
    if submission.get("platform_fault"):
        line += " (the platform's fault, not the bundle's: it does not count against the quota)"
    if submission.get("disqualified"):
        line += f" (disqualified: {submission.get('disqualification_reason') or 'see the site'})"
    out.print(line)
    if submission["results"]:
        out.print(_results_table(submission))
    elif status not in FINISHED:
        done, total = submission["progress_done"], submission["progress_total"]
        out.print(f"{done}/{total or len(submission['problems'])} problems evaluated")
    if submission.get("artifacts"):
        out.print(_artifacts_table(submission))
        if any(a["name"].endswith(".trace.json") for a in submission["artifacts"]):
            out.print(TRACE_HELP)
    out.print(submission["html_url"])
    return _outcome(submission)


def cmd_submit(args: argparse.Namespace) -> int:
    if args.entry or args.samples:
        return cmd_submit_samples(args)
    bundle = Path(args.bundle)
    if not bundle.is_file():
        raise UsageError(f"{bundle}: no such file")
    if args.case and args.mode != "profile":
        raise UsageError("--case names the case to profile: it goes with --mode profile")
    client = _client(args, need_token=True)
    created = client.submit(
        bundle, mode=args.mode, profile=args.profile or "", profile_case=args.case or ""
    )
    _err().print(
        f"Submitted #{created['id']} for {created['team']}: {_run_label(created)}, "
        f"{len(created['problems'])} problem(s), {created['status']}. {created['html_url']}"
    )
    if created.get("notice"):
        _err().print(_plain(created["notice"]))
    if not args.wait:
        return EXIT_OK
    return _report(_follow(client, created["id"], poll=args.poll))


def _poll(client: Client, sid: int) -> dict:
    """The submission, waiting out a 429 rather than giving up on a long evaluation."""
    while True:
        try:
            return client.get(f"submissions/{sid}/")
        except ApiError as exc:
            if exc.status != 429:
                raise
            sleep(min(exc.retry_after or POLL_S, MAX_BACKOFF_S))


def _follow(client: Client, sid: int, *, poll: float) -> dict:
    """Poll until the submission is finished, with a bar of problems done out of total."""
    columns = (
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[current]}"),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=_err(), transient=False) as progress:
        task = progress.add_task("queued", total=None, current="")
        while True:
            submission = _poll(client, sid)
            total = submission["progress_total"] or len(submission["problems"])
            progress.update(
                task,
                description=submission["status"],
                total=total,
                completed=submission["progress_done"],
                current=submission["current_problem"],
            )
            if submission["status"] in FINISHED:
                if submission["status"] == "done":
                    progress.update(task, completed=total, current="")
                return submission
            sleep(poll)


def cmd_profiles(args: argparse.Namespace) -> int:
    client = _client(args, need_token=True)
    table = Table("profile", "hardware", "workers", box=None)
    for offer in client.get("profiles/"):
        name = offer["name"] + (" (default)" if offer["is_default"] else "")
        table.add_row(name, offer["label"], offer["note"])
    _out().print(table)
    return EXIT_OK


def cmd_quota(args: argparse.Namespace) -> int:
    quota = _client(args, need_token=True).get("quota/")
    out = _out()
    for mode in quota["modes"]:
        out.print(f"{mode['mode']:>9}: {mode['summary']}")
    out.print(f"At most {quota['active_limit']} queued or running at once ({quota['active']} now).")
    refused = [m for m in quota["modes"] if m["refusal"]]
    for mode in refused:
        _err().print(f"{mode['mode']}: {mode['refusal']}")
    return EXIT_OK


def cmd_download(args: argparse.Namespace) -> int:
    """Write the submission's artifacts (all, or the ones named) into a folder."""
    client = _client(args, need_token=True)
    submission = client.get(f"submissions/{args.id}/")
    artifacts = {a["name"]: a for a in submission.get("artifacts", [])}
    names = args.names or sorted(artifacts)
    unknown = [n for n in names if n not in artifacts]
    if unknown:
        known = ", ".join(sorted(artifacts)) or "none"
        raise UsageError(f"#{args.id} has no artifact {unknown[0]!r} (it has: {known})")
    folder = Path(args.to)
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        if not artifacts[name].get("url"):
            _err().print(f"{name}: its file was deleted with the run's other old data")
            continue
        # A plain name (the site checked it), and taken as one: never a path out of `folder`.
        target = folder / Path(name).name
        target.write_bytes(client.download(f"submissions/{args.id}/artifacts/{quote(name)}/"))
        cut = CUT if artifacts[name]["truncated"] else ""
        _err().print(f"{target}: {file_size(target.stat().st_size)}{cut}")
    if any(n.endswith(".trace.json") for n in names):
        _err().print(TRACE_HELP)
    return EXIT_OK


def cmd_submit_samples(args: argparse.Namespace) -> int:
    """A batch of an entry's samples, one bundle each: sent at once, all kept or none."""
    if not (args.entry and args.samples) or args.bundle:
        raise UsageError("--entry NAME and --samples DIR go together, without a bundle")
    try:
        samples = entries.read_samples(Path(args.samples))
    except (entries.SamplesError, OSError) as exc:
        raise UsageError(str(exc)) from None
    client = _client(args, need_token=True)
    batch = entries.submit_samples(client, args.entry, samples)
    _err().print(
        f"Sent batch {batch['batch']} of entry {args.entry}: {len(batch['samples'])} sample(s), "
        f"{sum(len(s['problems']) for s in batch['samples'])} attempt(s) queued."
    )
    if args.wait:
        batch = _follow_batch(client, args.entry, batch["batch"], poll=args.poll)
    if args.json:
        _out().print(entries.dumps(batch))
    else:
        _out().print(entries.summary(batch))
        _out().print(entries.status_table(batch))
    return EXIT_OK


def _follow_batch(client: Client, entry: str, batch: int, *, poll: float) -> dict:
    """Poll until no sample of the batch is queued or running, waiting out 429s."""
    while True:
        try:
            status = entries.entry_status(client, entry, batch=batch)
        except ApiError as exc:
            if exc.status != 429:
                raise
            sleep(min(exc.retry_after or POLL_S, MAX_BACKOFF_S))
            continue
        _err().print(entries.summary(status))
        if status["finished"]:
            return status
        sleep(poll)


def cmd_entry_register(args: argparse.Namespace) -> int:
    client = _client(args, need_token=True)
    entry = entries.register(client, args)
    _err().print(
        f"Registered {entry['kind']} entry {entry['slug']} for {entry['team_name']}: "
        f"n={entry['samples_per_problem']}, k={entry['k']}. {entry['html_url']}"
    )
    return EXIT_OK


def cmd_entry_status(args: argparse.Namespace) -> int:
    status = entries.entry_status(_client(args), args.name)
    if args.json:
        _out().print(entries.dumps(status))
    else:
        _out().print(entries.summary(status))
        _out().print(entries.status_table(status))
    return EXIT_OK


def cmd_status(args: argparse.Namespace) -> int:
    client = _client(args, need_token=True)
    return _report(client.get(f"submissions/{args.id}/"))


def cmd_cancel(args: argparse.Namespace) -> int:
    client = _client(args, need_token=True)
    cancelled = client.post(f"submissions/{args.id}/cancel/")
    _err().print(f"Submission #{cancelled['id']}: {cancelled['status']}.")
    return EXIT_OK


def cmd_leaderboard(args: argparse.Namespace) -> int:
    client = _client(args)
    if args.problem:
        return _problem_board(client, args)
    board = client.get("leaderboard/", category=args.category, profile=args.profile, who=args.who)
    scope = board["category"] or "all categories"
    # Counts beside shares: where problem weights make them differ, the shares say so (an
    # older site sends no "weighted", and its shares go unlabelled).
    weighted = " (weighted)" if board.get("weighted") else ""
    table = Table(
        "rank", "team", "solved", f"fast_1{weighted}", f"fast_2{weighted}", "geomean",
        "roofline",
        title=f"{scope}, profile {board['profile']}",
        caption=RULE + (WEIGHTED if weighted else ""),
    )  # fmt: skip
    for row in board["rows"]:
        score = row["score"]
        kind = f" [{row['entry_kind']}]" if row.get("entry_kind") else ""
        table.add_row(
            _rank(row),
            row["team"] + kind,
            f"{score['solved']} of {score['total']}",
            _fmt(score.get("fast_1"), ".0%"),
            _fmt(score.get("fast_2"), ".0%"),
            _fmt(score["geomean"], ".2f", "x"),
            _fmt(score.get("roofline"), ".0%"),
        )
    _out().print(table)
    return EXIT_OK


def _rank(row: dict) -> str:
    """The rank, or the range of places where the intervals cannot separate scores ("2-4");
    an older site sends no range."""
    if row["rank"] is None:
        return "—"
    return str(row.get("rank_range") or row["rank"])


def _problem_board(client: Client, args: argparse.Namespace) -> int:
    board = client.get(f"leaderboard/problems/{args.problem}/", profile=args.profile)
    table = Table(
        "rank", "team", "speedup", "time", "reference", "roofline",
        title=f"{board['problem']}, profile {board['profile']}",
    )  # fmt: skip
    for row in _with_examples(board):
        table.add_row(
            "—" if row.get("is_example") else str(row["rank"]),
            row["label"] if row.get("is_example") else row["team"],
            _speedup(row),
            duration_us(row["time_us"]),
            duration_us(row["ref_time_us"]),
            _fmt(row["roofline"], ".0%"),
        )
    _out().print(table)
    return EXIT_OK


def _with_examples(board: dict) -> list[dict]:
    """The teams' rows with the example rows (unranked) where their speedups put them, as
    on the problem's page: an example goes under every team at least as fast."""

    def place(row: dict) -> float:
        return -row["speedup"] if row["speedup"] is not None else float("inf")

    # An older site sends no "examples": the ranking alone.
    rows = [(place(r), 0, i, r) for i, r in enumerate(board["rows"])]
    rows += [(place(r), 1, i, r) for i, r in enumerate(board.get("examples", []))]
    return [row for *_, row in sorted(rows, key=lambda item: item[:3])]


def _positive(text: str) -> float:
    value = float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError("must be positive")
    return value


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(
        prog="pkb",
        description="Submit multi-GPU kernels to a pkb leaderboard and follow them.",
        epilog="The site and token come from --url, PKB_URL and PKB_TOKEN, or `pkb login`'s "
        "config file. Exit codes: 0 ok, 1 a submission or problem failed, 2 bad arguments, "
        "3 the site refused the request or could not be reached.",
    )
    top.add_argument("--url", help="the site, e.g. https://kernels.example.org")
    commands = top.add_subparsers(dest="command", required=True, metavar="COMMAND")

    login = commands.add_parser("login", help="check a team API token and store it")
    login.add_argument("--token", help="the token (asked for when not given)")
    login.set_defaults(run=cmd_login)

    commands.add_parser("problems", help="list the open problems").set_defaults(run=cmd_problems)

    submit = commands.add_parser(
        "submit",
        help="upload a bundle for your team",
        epilog="Modes: " + "; ".join(f"{m}: {text}" for m, text in MODES.items()) + ". Each "
        "mode has its own quota (`pkb quota`).",
    )
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

    profiles = commands.add_parser(
        "profiles", help="the hardware profiles to submit to, and their workers connected now"
    )
    profiles.set_defaults(run=cmd_profiles)

    quota = commands.add_parser("quota", help="your team's runs used per mode, and the next slot")
    quota.set_defaults(run=cmd_quota)

    download = commands.add_parser(
        "download", help="save a submission's artifacts (a profile run's traces and tables)"
    )
    download.add_argument("id", type=int)
    download.add_argument("names", nargs="*", help="the artifacts to save (default: all)")
    download.add_argument("--to", default=".", help="the folder to save them in (default: .)")
    download.set_defaults(run=cmd_download)

    status = commands.add_parser("status", help="a submission's state and results")
    status.add_argument("id", type=int)
    status.set_defaults(run=cmd_status)

    cancel = commands.add_parser("cancel", help="cancel a queued or running submission")
    cancel.add_argument("id", type=int)
    cancel.set_defaults(run=cmd_cancel)

    board = commands.add_parser("leaderboard", help="the ranking, overall or per category")
    board.add_argument("--category", help="e.g. collective, tensor, context")
    board.add_argument("--profile", help="hardware profile, e.g. h200x4 (default: the site's)")
    board.add_argument("--problem", help="rank teams on one problem instead")
    board.add_argument("--who", choices=("all", "people", "models"), help="whose rows (all)")
    board.set_defaults(run=cmd_leaderboard)

    entry = commands.add_parser("entry", help="model and agent entries: register, status")
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
    register.set_defaults(run=cmd_entry_register)
    entry_status = entry_commands.add_parser("status", help="an entry's samples and pass@k")
    entry_status.add_argument("name", help="the entry's slug")
    entry_status.add_argument("--json", action="store_true", help="as JSON, for a harness")
    entry_status.set_defaults(run=cmd_entry_status)

    # --url is accepted after the command too (`pkb submit b.zip --url ...`).
    every = (login, submit, status, cancel, board, profiles, quota, download)
    for sub in (*every, commands.choices["problems"]):
        sub.add_argument("--url", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    for sub in (register, entry_status):
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
        _err().print(f"pkb: error: {exc}")
        return EXIT_USAGE
    except (ApiError, config.ConfigError) as exc:
        _err().print(f"pkb: error: {exc}")
        return EXIT_ERROR
    except KeyboardInterrupt:
        _err().print("pkb: interrupted")
        return 130
