"""`python -m problems [--json] [--category C]`: list the problem catalog."""

from __future__ import annotations

import argparse
import json
import sys

from problems.registry import all_problems
from problems.spec import Category, Problem


def _as_json(problem: Problem) -> dict:
    return {
        "slug": problem.slug,
        "title": problem.title,
        "category": str(problem.category),
        "signature": problem.signature,
        "world_sizes": list(problem.world_sizes),
        "dtypes": list(problem.dtypes),
        "version": problem.version,
        "dev_cases": [c.to_json() for c in problem.dev_cases],
    }


def _table(problems: list[Problem]) -> str:
    rows = [("slug", "category", "world sizes", "dtypes")]
    rows += [
        (p.slug, str(p.category), ",".join(map(str, p.world_sizes)), ",".join(p.dtypes))
        for p in problems
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = [
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in rows
    ]
    return "\n".join(lines) + f"\n\n{len(problems)} problems"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m problems", description=__doc__)
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    parser.add_argument("--category", choices=[c.value for c in Category])
    args = parser.parse_args(argv)
    problems = [p for p in all_problems() if args.category in (None, p.category)]
    if args.json:
        json.dump([_as_json(p) for p in problems], sys.stdout, indent=2)
        print()
    else:
        print(_table(problems))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
