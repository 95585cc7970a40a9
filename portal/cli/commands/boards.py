"""The site's public read commands: `pkb problems` and `pkb leaderboard` (overall, per
category, or one problem's ranking with the example rows placed among the teams)."""

from __future__ import annotations

import argparse

from portal.cli.client import Client
from portal.cli.commands import common
from portal.cli.commands.common import EXIT_OK, fmt, out, speedup
from portal.formats import duration_us
from portal.leaderboard.scoring import RULE

WEIGHTED = (
    " fast_1 and fast_2 are shares weighted by the problems' weights; solved counts problems."
)


def cmd_problems(args: argparse.Namespace) -> int:
    client = common.client(args)
    problems = client.get_all("problems/")
    table = common.table("slug", "category", "title", "world sizes", box=None)
    for p in problems:
        sizes = ", ".join(str(w) for w in p["world_sizes"])
        table.add_row(p["slug"], p["category"], p["title"], sizes)
    out().print(table)
    return EXIT_OK


def cmd_leaderboard(args: argparse.Namespace) -> int:
    client = common.client(args)
    if args.problem:
        return _problem_board(client, args)
    board = client.get_board(
        "leaderboard/", category=args.category, profile=args.profile, who=args.who
    )
    scope = board["category"] or "all categories"
    # Counts beside shares: where problem weights make them differ, the shares say so (an
    # older site sends no "weighted", and its shares go unlabelled).
    weighted = " (weighted)" if board.get("weighted") else ""
    table = common.table(
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
            fmt(score.get("fast_1"), ".0%"),
            fmt(score.get("fast_2"), ".0%"),
            fmt(score["geomean"], ".2f", "x"),
            fmt(score.get("roofline"), ".0%"),
        )
    out().print(table)
    return EXIT_OK


def _rank(row: dict) -> str:
    """The rank, or the range of places where the intervals cannot separate scores ("2-4");
    an older site sends no range."""
    if row["rank"] is None:
        return "—"
    return str(row.get("rank_range") or row["rank"])


def _problem_board(client: Client, args: argparse.Namespace) -> int:
    board = client.get_board(f"leaderboard/problems/{args.problem}/", profile=args.profile)
    table = common.table(
        "rank", "team", "speedup", "time", "reference", "roofline",
        title=f"{board['problem']}, profile {board['profile']}",
        caption=RULE,
    )  # fmt: skip
    for row in _with_examples(board):
        table.add_row(
            "—" if row.get("is_example") else _rank(row),
            row["label"] if row.get("is_example") else row["team"],
            speedup(row),
            duration_us(row["time_us"]),
            duration_us(row["ref_time_us"]),
            fmt(row["roofline"], ".0%"),
        )
    out().print(table)
    return EXIT_OK


def _with_examples(board: dict) -> list[dict]:
    """The teams' rows with the example rows (unranked) where their lower ends put them, as
    on the problem's page: an example goes under every team at least as sure to be fast."""

    def place(row: dict) -> float:
        # The interval's lower end, as the site orders; the speedup where there is none.
        lower = row.get("speedup_low")
        lower = row["speedup"] if lower is None else lower
        return -lower if lower is not None else float("inf")

    # An older site sends no "examples": the ranking alone.
    rows = [(place(r), 0, i, r) for i, r in enumerate(board["rows"])]
    rows += [(place(r), 1, i, r) for i, r in enumerate(board.get("examples", []))]
    return [row for *_, row in sorted(rows, key=lambda item: item[:3])]
