"""Hostile bundles in a profile run (CPU, gloo, world size 2): a trace is untrusted bytes.

Each solution is an honest all-reduce whose module, at import into the candidate's
runner, replaces torch.profiler's export or start: rank 0 and rank 1 of a problem attack
differently. The judge drops or cuts what they write, the results are recorded as for
any correct solution, and every artifact that leaves the host is checked data that fits
the finished message's caps.
"""

from __future__ import annotations

import json

import pytest

from evaluator.contract import Mode, ProblemStatus, read_artifacts
from evaluator.judge.profiling import within_budget
from tests.evaluator import samples
from tests.evaluator.judging import judge_files, small_settings

HONEST = """
def solution(x):
    out = x.clone()
    dist.all_reduce(out)
    return out
"""

# Rank 0 writes bytes that are not JSON, rank 1 a nesting bomb.
GARBAGE_OR_NESTED = """
import torch
import torch.distributed as dist

def export(self, path):
    with open(path, "wb") as out:
        out.write(b"\\x00garbage{" if dist.get_rank() == 0 else b"[" * 1_000_000)

torch.profiler.profile.export_chrome_trace = export
"""

# Rank 0 writes a valid trace of 10 MiB (120,000 forged operators), rank 1 25 MiB of
# spaces (over what the judge reads at all).
OVERSIZED_OR_FLOOD = """
import torch
import torch.distributed as dist

EVENT = '{"ph":"X","cat":"cpu_op","name":"aten::forged","pid":1,"tid":1,"ts":%d,"dur":1}'

def export(self, path):
    with open(path, "wb") as out:
        if dist.get_rank() == 0:
            events = ",".join(EVENT % i for i in range(120_000))
            out.write(('{"traceEvents":[' + events + "]}").encode())
        else:
            out.write(b" " * (25 << 20))

torch.profiler.profile.export_chrome_trace = export
"""

# The profiler cannot start at all.
NO_PROFILER = """
import torch
import torch.distributed as dist

def start(self):
    raise RuntimeError("no profiler for you")

torch.profiler.profile.start = start
"""

ATTACKS = {
    "pf-garbage-or-nested": GARBAGE_OR_NESTED,
    "pf-oversized-or-flood": OVERSIZED_OR_FLOOD,
    "pf-no-profiler": NO_PROFILER,
}


@pytest.fixture(scope="module")
def profiled():
    catalog = {slug: samples.variant(slug) for slug in ATTACKS}
    files = {f"{slug}.py": source + HONEST for slug, source in ATTACKS.items()}
    artifacts: list = []
    settings = small_settings("profile-attacks-secret-0123", warmup=1, iters=4)
    results = judge_files(
        files, catalog, settings, "profile-attacks", mode=Mode.PROFILE, on_artifact=artifacts.append
    )
    return results, {a.name: a for a in artifacts}


def test_every_attacked_problem_is_still_judged_as_correct(profiled):
    results, _ = profiled
    for slug, result in results.items():
        assert result.status == ProblemStatus.PASSED, (slug, result.message, result.log[-2000:])
        assert not result.flags and result.time_us is None


def test_garbage_and_a_nesting_bomb_are_dropped_and_said_so(profiled):
    _, artifacts = profiled
    assert "pf-garbage-or-nested.rank0.trace.json" not in artifacts
    assert "pf-garbage-or-nested.rank1.trace.json" not in artifacts
    summary = artifacts["pf-garbage-or-nested.summary.md"].data().decode()
    assert "| 0 | - | - | - | - | trace dropped: the trace is not valid JSON" in summary
    assert "| 1 | - | - | - | - | trace dropped: the trace nests too deeply |" in summary


def test_an_oversized_trace_is_cut_to_valid_json_and_a_flood_is_not_read(profiled):
    _, artifacts = profiled
    cut = artifacts["pf-oversized-or-flood.rank0.trace.json"]
    assert cut.truncated and "events left out to fit" in cut.note
    loaded = json.loads(cut.data())
    assert 0 < len(loaded["traceEvents"]) < 120_000
    assert "events left out" in loaded["otherData"]["pkb"]
    assert "pf-oversized-or-flood.rank1.trace.json" not in artifacts
    summary = artifacts["pf-oversized-or-flood.summary.md"].data().decode()
    assert "trace dropped: the trace is over 24 MiB: not read" in summary
    # The forged operators are summarised from the whole trace: they mislead their team.
    assert "`aten::forged` | 120000 |" in summary


def test_a_profiler_that_cannot_start_leaves_a_summary_that_says_so(profiled):
    _, artifacts = profiled
    assert not [name for name in artifacts if name.startswith("pf-no-profiler.rank")]
    summary = artifacts["pf-no-profiler.summary.md"].data().decode()
    assert summary.count("no trace: the profiler failed (RuntimeError: no profiler for you)") == 2
    assert "| your solution |" in summary  # the judges' times do not depend on it


def test_what_leaves_the_host_is_checked_data_within_the_caps(profiled):
    _, artifacts = profiled
    message = [a.to_json() for a in within_budget(list(artifacts.values()))]
    assert len(read_artifacts(message)) == len(artifacts)
