"""The compile pass's import server: one per bundle, torch imported once, a child per file.

The compile pass is called directly here, without a sandbox (tests/evaluator/test_compile.py
judges through the sandbox): each file notes the process it was imported in and its
parent, and whether torch was already there when it began.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from evaluator.contract import ProblemStatus
from evaluator.host.rlimits import Limits
from evaluator.intake.compile import import_solutions
from tests.evaluator.judging import judge_files, small_settings
from tests.redteam import attacks

TIMEOUT_S = 60
# How long a stopped server goes unnoticed; above a sandboxed torch import on a loaded
# 2-core machine (over 6 s: test_compile.py), else the server is not stopped but too slow.
STOPPED_TIMEOUT_S = 15

NOTES = """
import os, sys, json
with open({notes!r} + "/" + __name__, "a") as f:
    f.write(json.dumps({{"pid": os.getpid(), "parent": os.getppid(),
                         "torch_before": "torch" in sys.modules}}) + "\\n")
"""

PLAIN = """
import torch

def solution(x):
    return x
"""

# Kills the server that forked it the first time it is imported, then imports as any other
# (never this test's process, its parent when it is imported alone).
KILLS_ITS_PARENT_ONCE = """
import os, signal, time
_marker = {notes!r} + "/killed-once"
if not os.path.exists(_marker) and os.getppid() != {tester}:
    open(_marker, "w").close()
    os.kill(os.getppid(), signal.SIGKILL)
    time.sleep(60)

def solution(x):
    return x
"""

STOPS_ITS_PARENT_ONCE = """
import os, signal
_marker = {notes!r} + "/stopped-once"
if not os.path.exists(_marker) and os.getppid() != {tester}:
    open(_marker, "w").close()
    os.kill(os.getppid(), signal.SIGSTOP)

def solution(x):
    return x
"""

SEGFAULTS = """
import os, signal
os.kill(os.getpid(), signal.SIGSEGV)
"""


def compile_pass(folder: Path, files: dict[str, str], **kwargs) -> dict:
    notes = folder / "notes"
    bundle, logs = folder / "bundle", folder / "logs"
    for path in (notes, bundle, logs):
        path.mkdir()
    modules = {}
    for name, source in files.items():
        (bundle / name).write_text(
            NOTES.format(notes=str(notes)) + source.format(notes=str(notes), tester=os.getpid())
        )
        modules[name] = "pkb_solution_" + name.removesuffix(".py")
    return import_solutions(
        modules,
        folder=bundle,
        env={"HOME": str(folder)},
        logs=logs,
        **{"timeout_s": TIMEOUT_S, **kwargs},
    )


def records(folder: Path, name: str) -> list[dict]:
    path = folder / "notes" / ("pkb_solution_" + name.removesuffix(".py"))
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_each_file_is_forked_from_one_server_that_imported_torch_first(tmp_path):
    files = {f"f{i}.py": PLAIN for i in range(4)}
    assert compile_pass(tmp_path, files) == {}
    seen = [records(tmp_path, name)[0] for name in files]
    assert len({r["pid"] for r in seen}) == len(files)
    assert len({r["parent"] for r in seen}) == 1
    assert all(r["torch_before"] for r in seen)


def test_a_hosts_file_size_cap_below_the_default_imports_as_before():
    """The server's limits are its children's, and in the sandbox they run as a user who
    cannot raise them: a child's log must not try to (every import of the red team's
    module exited 70 at a 16 MiB cap, 2026-11-29)."""
    cap = Limits(file_bytes=16 * 1024 * 1024)
    settings = small_settings("fsize-secret-0123456789", warmup=1, iters=2, limits=cap)
    files = {"honest.py": attacks.HONEST}
    result = judge_files(files, {"honest": attacks.problem("honest")}, settings, "fsize")
    assert result["honest"].status == ProblemStatus.PASSED, result["honest"].message


def test_a_crash_is_named_by_how_it_ended(tmp_path):
    failures = compile_pass(tmp_path, {"ok.py": PLAIN, "crash.py": SEGFAULTS})
    assert list(failures) == ["crash.py"]
    assert failures["crash.py"].error == "the importing process was killed by SIGSEGV"


@pytest.mark.parametrize("order", [["killer.py", "ok.py"], ["ok.py", "killer.py"]])
def test_when_the_server_dies_what_it_left_is_imported_each_alone(tmp_path, order):
    sources = {"killer.py": KILLS_ITS_PARENT_ONCE, "ok.py": PLAIN}
    assert compile_pass(tmp_path, {name: sources[name] for name in order}) == {}
    first, again = records(tmp_path, "killer.py")
    # First forked by the server, then spawned by this process (no launcher here).
    assert first["parent"] != os.getpid() and again["parent"] == os.getpid()


def test_when_the_server_stops_answering_what_it_left_is_imported_each_alone(tmp_path):
    files = {"stopper.py": STOPS_ITS_PARENT_ONCE, "later.py": PLAIN}
    assert compile_pass(tmp_path, files, timeout_s=STOPPED_TIMEOUT_S, parallel=1) == {}
    [served] = records(tmp_path, "stopper.py")
    [alone] = records(tmp_path, "later.py")
    assert served["parent"] != os.getpid() and alone["parent"] == os.getpid()
