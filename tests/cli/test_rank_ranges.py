"""`pkb leaderboard` shows rank ranges where the intervals cannot separate teams, and the
counting rule under the table (issue 23)."""

from __future__ import annotations

import pytest

from portal.cli import main as cli
from portal.leaderboard.scoring import RULE
from tests.portal.leaderboard.test_rank_ranges import close_race  # noqa: F401  (fixture)

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
