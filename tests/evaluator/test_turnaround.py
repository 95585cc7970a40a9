"""`python -m evaluator.tools.turnaround`: each phase of one evaluation, in seconds."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from evaluator.tools import turnaround
from tests.evaluator.scratch import reachable_folder

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "pytorch" / "all-reduce.py"
PHASES = (
    "imports (torch, evaluator)",
    "request read, bundle checked",
    "sandbox start",
    "compile pass",
    "peer bandwidth probe, set-up",
    "pool start",
    "judging all-reduce",
    "teardown (ranks, sandbox, scratch)",
    "recording (finished message)",
    "total",
)


def test_it_prints_every_phase_of_one_evaluation_with_its_seconds(tmp_path, monkeypatch, capsys):
    bundle = tmp_path / "tiny"
    bundle.mkdir()
    shutil.copy(EXAMPLE, bundle / "all-reduce.py")
    with reachable_folder("turnaround") as scratch:
        monkeypatch.setenv("PKB_SCRATCH_DIR", str(scratch))
        monkeypatch.setenv("PKB_SEED_SECRET", "turnaround-secret-0123456789")
        monkeypatch.setenv("PKB_PROFILE", "cpu")
        assert turnaround.main([str(bundle), "--world-size", "2", "--mode", "test"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[-1] == "all-reduce: passed", lines  # then what each problem came to
    seconds = {}
    for line in lines[:-1]:
        found = re.fullmatch(r"(.+?)\s+(\d+\.\d\d) s", line)
        assert found, line
        seconds[found.group(1)] = float(found.group(2))
    assert tuple(seconds) == PHASES
    assert seconds["compile pass"] > 0 and seconds["pool start"] > 0
    assert seconds["total"] >= sum(v for k, v in seconds.items() if k != "total") - 0.05
