"""A wrong answer's errors, judged for real on two CPU ranks over gloo: the message, the
result's fields, its case's row and the site's column say the same numbers (the
definition: docs/architecture.md, "Errors")."""

from __future__ import annotations

import re

import pytest

from evaluator.contract import ProblemStatus
from portal.submissions.templatetags.results import error
from tests.evaluator import samples
from tests.evaluator.judging import judge_files, small_settings

# Every element off by a factor that differs by rank: rank 0's elements are 100% off,
# rank 1's 200%. Both ranks fail; the message names rank 0's worst element.
WRONG_BY_RANK = """
import torch.distributed as dist

def solution(x):
    out = x.clone()
    dist.all_reduce(out)
    return out * (dist.get_rank() + 2)
"""

CATALOG = {"ar-wrong": samples.variant("ar-wrong")}


@pytest.fixture(scope="module")
def wrong():
    settings = small_settings("reported-errors-secret-0123456789", warmup=1, rounds=2)
    results = judge_files({"ar-wrong.py": WRONG_BY_RANK}, CATALOG, settings, "reported-errors")
    return results["ar-wrong"]


def test_a_wrong_answer_reports_the_errors_its_message_names(wrong):
    assert wrong.status == ProblemStatus.WRONG_ANSWER, wrong.message + wrong.log
    assert wrong.message.startswith("rank 0, case dev-tiny (float32): output 0: ")
    said = re.search(r"\(abs err ([^,]+), rel err ([^;]+);", wrong.message)
    assert said, wrong.message
    abs_said, rel_said = said.groups()
    # Rank 0's element, not rank 1's larger error, and no second "largest" number.
    assert wrong.max_rel_err == pytest.approx(1.0)
    assert (error(wrong.max_abs_err), error(wrong.max_rel_err)) == (abs_said, rel_said)
    assert "largest" not in wrong.message
    (case,) = wrong.cases
    assert not case.passed
    assert (case.max_abs_err, case.max_rel_err) == (wrong.max_abs_err, wrong.max_rel_err)
