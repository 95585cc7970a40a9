"""Bundle code that takes over the candidate's echo round (gloo, world size 2).

Each side of a timed pair ends with an echo round of its runner: the reference's is the
tare, timed; the candidate's is the same round, untimed, so that both runners do the same
work in the same order (judge/rank.py, `echo_last`). The candidate's runs in the
candidate's process, where bundle code can replace what the echo returns. Nothing of that
round decides a score: its time is not kept and its reports are not read. A hostile echo
must therefore neither break a judge nor change a verdict; an echo that fails is the
candidate's failure; and an honest bundle passes right after on the same worker.
"""

from __future__ import annotations

import pytest

from evaluator.contract import ProblemStatus
from tests.evaluator.judging import judge_files, small_settings
from tests.redteam import attacks

# What the candidate's echo calls return instead of the outputs they were asked to echo.
HOSTILE = {
    "zero-stride": "torch.zeros(1).expand(1 << 34)",
    "sparse": "torch.ones(256).to_sparse()",
    "meta": 'torch.empty(256, device="meta")',
    "oversized": "torch.zeros(1 << 22)",
    "foreign": "[1.0] * 256",
    "tuple": "(torch.ones(256), torch.ones(256))",
    "none": "None",
}
RAISES = 'raise RuntimeError("no echo from this runner")'

TEMPLATE = """
import torch
import torch.distributed as dist
from evaluator.candidate import runner


def _hostile_echo(base, slots):
    def call(**kwargs):
        {body}

    return call


runner._echo = _hostile_echo


def solution(x):
    out = x.clone()
    dist.all_reduce(out)
    return out
"""


@pytest.fixture(scope="module")
def judged():
    files = {f"echo-{name}.py": TEMPLATE.format(body=f"return {h}") for name, h in HOSTILE.items()}
    files["echo-raises.py"] = TEMPLATE.format(body=RAISES)
    for name in [*HOSTILE, "raises"]:
        files[f"echo-after-{name}.py"] = attacks.HONEST
    catalog = {path[:-3]: attacks.problem(path[:-3]) for path in files}
    settings = small_settings(
        "echo-secret-0123456789", warmup=1, iters=4, rounds=2, problem_timeout_s=30
    )
    return judge_files(files, catalog, settings, "echo")


@pytest.mark.parametrize("name", list(HOSTILE))
def test_what_the_candidates_echo_returns_is_never_read(judged, name):
    result = judged[f"echo-{name}"]
    # Timed pairs in both orders ran, each side ending with its echo: the candidate's
    # echo said whatever it liked, and the verdict is that of its timed rounds.
    assert result.status == ProblemStatus.PASSED, (result.status, result.message)
    assert [r["first"] for r in result.cases[0].rounds] == ["reference", "candidate"]
    after = judged[f"echo-after-{name}"]
    assert after.status == ProblemStatus.PASSED, after.message


def test_an_echo_that_fails_is_the_candidates_failure(judged):
    result = judged["echo-raises"]
    assert result.status == ProblemStatus.RUNTIME_ERROR, (result.status, result.message)
    assert "no echo from this runner" in result.message
    after = judged["echo-after-raises"]
    assert after.status == ProblemStatus.PASSED, after.message
