"""The team's side of the site: `pkb login` (a token checked and stored), `pkb profiles`
(where it may submit) and `pkb quota` (its runs used per mode)."""

from __future__ import annotations

import argparse
import getpass
import sys

from portal.cli import config
from portal.cli.client import Client
from portal.cli.commands import common
from portal.cli.commands.common import EXIT_OK, UsageError, err, out


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
    err().print(f"Logged in to {cfg.url} as {me['username']}{team}. Token saved in {path}.")
    return EXIT_OK


def _ask_token(url: str) -> str:
    prompt = f"API token for {url} (create one on the site's Team page, under API tokens): "
    if sys.stdin.isatty():
        return getpass.getpass(prompt).strip()
    return sys.stdin.readline().strip()


def cmd_profiles(args: argparse.Namespace) -> int:
    client = common.client(args, need_token=True)
    table = common.table("profile", "hardware", "workers", box=None)
    for offer in client.get("profiles/"):
        name = offer["name"] + (" (default)" if offer["is_default"] else "")
        table.add_row(name, offer["label"], offer["note"])
    out().print(table)
    return EXIT_OK


def cmd_quota(args: argparse.Namespace) -> int:
    quota = common.client(args, need_token=True).get("quota/")
    console = out()
    for mode in quota["modes"]:
        console.print(f"{mode['mode']:>9}: {mode['summary']}")
    console.print(
        f"At most {quota['active_limit']} queued or running at once ({quota['active']} now)."
    )
    if "entries" in quota:  # a site from before entries shared the team's budget has none
        console.print(
            f"{quota['entries']} of {quota['entries_limit']} model or agent entries registered."
        )
    refused = [m for m in quota["modes"] if m["refusal"]]
    for mode in refused:
        err().print(f"{mode['mode']}: {mode['refusal']}")
    return EXIT_OK
