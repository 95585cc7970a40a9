"""`pkb`'s tables in an 80-column terminal: every interval and name shown whole, never cut
to an ellipsis (issue 40, item 9). A cell that does not fit folds onto the next line, so a
column's text, read top to bottom, is every cell of it."""

from __future__ import annotations

import pytest

from evaluator.contract import ProblemResult as Reported
from evaluator.contract import ProblemStatus
from portal.cli import main as cli
from portal.cli.commands import common
from tests.portal.factories import ProblemFactory, SubmissionFactory
from tests.portal.judging import finish, judged, passed

pytestmark = pytest.mark.django_db(transaction=True)

VERTICAL = "│┃|"


@pytest.fixture(autouse=True)
def _eighty_columns(monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")  # the cli conftest's 200, narrowed
    assert common.out().width == 80


def column(out: str, header: str) -> str:
    """The column under `header`, its lines joined without spaces: a cell folded or
    wrapped over several lines reads as one again."""
    rows = [
        [cell.strip() for cell in _cells(line)]
        for line in out.splitlines()
        if any(bar in line for bar in VERTICAL)
    ]
    at = next(i for i, row in enumerate(rows) if header in row)
    index = rows[at].index(header)
    return "".join(row[index].replace(" ", "") for row in rows[at + 1 :] if len(row) > index)


def widest_row(out: str) -> int:
    """The table's widest line (a caption is soft-wrapped text: the terminal wraps it)."""
    return max(len(line) for line in out.splitlines() if any(bar in line for bar in VERTICAL))


def _cells(line: str) -> list[str]:
    for bar in VERTICAL[1:]:
        line = line.replace(bar, VERTICAL[0])
    return line.strip().strip(VERTICAL[0]).split(VERTICAL[0])


def run(capsys, *argv: str) -> tuple[int, str]:
    code = cli.main(list(argv))
    return code, capsys.readouterr().out


# As long as the catalog's longer slugs.
SLUG = "ulysses-attention-qkv-packed"


def test_status_shows_every_interval_whole_at_80_columns(capsys, as_alice, alice, team, problems):
    ProblemFactory(slug=SLUG)
    submission = SubmissionFactory(
        team=team, user=alice, running=True, problems=[SLUG, "all-reduce"]
    )
    wrong = "wrong answer: largest relative error 1.7e+02 at element (3, 4) of output 0"
    assert finish(
        submission.evaluation_id,
        passed(SLUG, 1.84, 1.80, 1.88, roofline=0.81),
        Reported("all-reduce", ProblemStatus.WRONG_ANSWER, 4, message=wrong),
    )
    code, out = run(capsys, "status", str(submission.pk))
    assert code == 1 and widest_row(out) <= 80
    assert "…" not in out
    assert column(out, "speedup") == "1.84x(1.80–1.88)—"
    assert column(out, "problem") == f"{SLUG}all-reduce"
    assert column(out, "message") == wrong.replace(" ", "")


def test_the_problem_board_shows_every_interval_whole_at_80_columns(
    capsys, site, alice, team, charlie_team, charlie, problems
):
    team.name = "TheCollectiveKernelsOfAliceAndBobInc"  # one word: rich cannot wrap it
    team.save()
    judged(team=team, user=alice, speedup=1.84, low=1.80, high=1.88)
    judged(team=charlie_team, user=charlie, speedup=1.234, low=1.1, high=1.456)
    code, out = run(capsys, "leaderboard", "--problem", "all-reduce")
    assert code == 0 and widest_row(out) <= 80
    assert "…" not in out
    assert column(out, "speedup") == "1.84x(1.80–1.88)1.23x(1.10–1.46)"
    assert column(out, "team") == f"{team.name}CharlieLtd"
