"""`pkb leaderboard` shows rank ranges where the intervals cannot separate teams, and the
counting rule under the table (issue 23)."""

from __future__ import annotations

import pytest

from portal.cli import main as cli
from portal.leaderboard.scoring import RULE
from tests.portal.factories import TeamFactory
from tests.portal.leaderboard.test_rank_ranges import close_race, result  # noqa: F401  (fixture)

pytestmark = pytest.mark.django_db(transaction=True)


def rank(line: str) -> str:
    return next(cell.strip() for cell in line.split("│") if cell.strip())


def test_the_board_shows_rank_ranges_and_the_rule(capsys, site, close_race):  # noqa: F811
    assert cli.main(["leaderboard"]) == 0
    out = capsys.readouterr().out
    lines = {
        name: line
        for line in out.splitlines()
        for name in ("Clear", "Near", "Noisy")
        if name in line
    }
    assert [rank(lines[n]) for n in ("Clear", "Near", "Noisy")] == ["1", "2-3", "2-3"]
    assert " ".join(RULE.split()[:8]) in " ".join(out.split())


def test_a_problems_table_shows_its_ranges_and_the_rule(capsys, site, problems):
    """As on the problem's page: Sure (1.2x, 1.1-1.3) above Wide (1.4x, 0.9-1.8), both
    "1-2"."""
    sure, wide = TeamFactory(name="Sure"), TeamFactory(name="Wide")
    result(wide, problems["all-reduce"], 1.4, 0.9, 1.8)
    result(sure, problems["all-reduce"], 1.2, 1.1, 1.3)
    assert cli.main(["leaderboard", "--problem", "all-reduce"]) == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if "Sure" in line or "Wide" in line]
    assert ["Sure" in rows[0], "Wide" in rows[1]] == [True, True]
    assert [rank(line) for line in rows] == ["1-2", "1-2"]
    assert " ".join(RULE.split()[:8]) in " ".join(out.split())
