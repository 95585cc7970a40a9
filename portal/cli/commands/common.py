"""What the command modules share: exit codes, the two consoles, the client from the
arguments, how a value from the site is printed, and the waiting between polls."""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Column, Table

from evaluator.face import ARTIFACT_CAP_BYTES, printable
from portal.cli import config
from portal.cli.client import ApiError, Client

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_ERROR = 0, 1, 2, 3
FINISHED = {"done", "failed", "cancelled"}
CUT = f" (cut at {ARTIFACT_CAP_BYTES // (1024 * 1024)} MiB by the host: the rest is missing)"
TRACE_HELP = (
    "A .trace.json opens in Perfetto: https://ui.perfetto.dev, then 'Open trace file' (read in "
    "your browser, never uploaded); or in Chrome at chrome://tracing, then 'Load'."
)
POLL_S = 2.0
# Waiting out a 429 while following a submission, at most this long per answer.
MAX_BACKOFF_S = 60.0

# Tests replace it to move the evaluation on between two polls, without waiting. Callers
# look it up here at each call (`common.sleep(...)`), so that the replacement is seen.
sleep: Callable[[float], None] = time.sleep


class UsageError(Exception):
    pass


def out() -> Console:
    return Console(highlight=False, markup=False, soft_wrap=True)


def err() -> Console:
    return Console(stderr=True, highlight=False, markup=False, soft_wrap=True)


def table(*headers: str, **options: Any) -> Table:
    """A table whose cells fold in a narrow terminal: rich's default cuts a cell to an
    ellipsis, and at 80 columns that took the upper end off every speedup's interval and
    the tail off long problem slugs. Folded, every character shows, over more lines."""
    return Table(*(Column(h, overflow="fold") for h in headers), **options)


def client(args: argparse.Namespace, *, need_token: bool = False) -> Client:
    cfg = config.load(url=args.url)
    if need_token and not cfg.token:
        raise ApiError("no token: run `pkb login` (or set PKB_TOKEN)", status=401)
    return Client(cfg.url, cfg.token)


def fmt(value: float | None, spec: str, suffix: str = "") -> str:
    return "—" if value is None else f"{value:{spec}}{suffix}"


def speedup(row: dict) -> str:
    """1.84x (1.80–1.88), or 1.84x where the site reports no interval (older results)."""
    text = fmt(row.get("speedup"), ".2f", "x")
    low, high = row.get("speedup_low"), row.get("speedup_high")
    if row.get("speedup") is None or low is None or high is None:
        return text
    return f"{text} ({low:.2f}–{high:.2f})"


def plain(text: str) -> str:
    """Text from the site as text: no terminal escapes (results written before the
    evaluator stripped them), no rich markup."""
    return escape(printable(text))


def back_off(exc: ApiError) -> None:
    """Wait out a 429 (as long as it asks, within bounds); any other refusal goes up."""
    if exc.status != 429:
        raise exc
    sleep(min(exc.retry_after or POLL_S, MAX_BACKOFF_S))
