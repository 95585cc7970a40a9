"""The precheck (evaluator/intake/precheck.py): every red-team bundle is flagged, no
example is, and each rule finds its pattern under another name too."""

from __future__ import annotations

from pathlib import Path

import pytest

from evaluator.contract import ProblemStatus
from evaluator.intake.precheck import load_rules, precheck_files, precheck_source
from tests.evaluator.judging import judge_files, sleeping_solution, small_settings
from tests.redteam import attacks
from tests.redteam import test_cpu_hog as cpu_hog
from tests.redteam import test_echo_attacks as echo
from tests.redteam import test_one_call_at_a_time as one_call
from tests.redteam import test_pair_order_attacks as pair_order
from tests.redteam import test_profile_attacks as profile
from tests.redteam import test_review_attacks as review
from tests.redteam import test_sandbox_allowlist as allowlist
from tests.redteam import test_sandbox_walls as walls
from tests.redteam import test_turn_signals as turn_signals

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _red_team() -> dict[str, str]:
    """Every hostile bundle file of tests/redteam, its templates filled as the tests do."""
    sources = {f"attacks:{a.name}": a.source for a in attacks.ATTACKS}
    sources.update({f"review:{k}": v for k, v in review.ATTACKS.items()})
    sources["one-call:look-ahead"] = one_call.LOOK_AHEAD
    sources["one-call:replay-seen"] = one_call.REPLAY_SEEN.replace("{short_at}", "12")
    sources["cpu-hog"] = cpu_hog.HOGGING.format(hogs=2, leave=True, notes="/tmp/notes")
    for name, hostile in echo.HOSTILE.items():
        sources[f"echo:{name}"] = echo.TEMPLATE.format(body=f"return {hostile}")
    for name, hostile in pair_order.HOSTILE.items():
        sources[f"pair-order:{name}"] = pair_order.TEMPLATE.format(
            honest_calls=pair_order.HONEST_CALLS, hostile=hostile
        )
    for name, source in profile.ATTACKS.items():
        sources[f"profile:{name}"] = source
    try:  # a red-team module still being written in this checkout joins once it is committed
        from tests.redteam import test_review_2026_11_29 as review_29

        sources["review-29:peek"] = review_29._peek_source()
    except ImportError:
        pass
    sources["turn-signals"] = turn_signals.CATCHING.format(notes="/tmp/notes")
    sources["walls:connect"] = walls.CONNECT.format(paths=["/run/x.sock"])
    for name in ("PTRACE", "HOARD", "PROCESSES", "REFERENCE_FOLDER"):
        sources[f"walls:{name.lower()}"] = getattr(walls, name)
    sources["allowlist:walls"] = allowlist.WALLS.format(sockets=[], portal=[], shm="x")
    for name in ("DISK", "PIDFD"):
        sources[f"allowlist:{name.lower()}"] = getattr(allowlist, name)
    return sources


@pytest.mark.parametrize(("name", "source"), sorted(_red_team().items()))
def test_every_hostile_bundle_of_the_red_team_is_flagged(name, source):
    assert precheck_source(source, f"{name.replace(':', '-')}.py"), name


def _example_bundles() -> list[Path]:
    return sorted(p for p in EXAMPLES.iterdir() if p.is_dir())


@pytest.mark.parametrize("folder", _example_bundles(), ids=lambda p: p.name)
def test_no_example_bundle_has_a_finding(folder):
    files = {p.name: p.read_bytes() for p in folder.glob("*.py")}
    solutions = {name[:-3]: name for name in files if not name.startswith("_")}
    assert solutions
    assert precheck_files(files, solutions) == {slug: [] for slug in solutions}


# Per rule: a plain form and a form under another name, each found at the given line.
CAUGHT = [
    ("frame-introspection", "import sys\nf = sys._getframe(1)", 2),
    ("frame-introspection", "import gc as g\nfound = g.get_objects()", 2),
    ("frame-introspection", "def f(frame):\n    return frame.f_back.f_locals", 2),
    ("harness-import", "from evaluator.candidate import runner", 1),
    ("harness-import", "import importlib\nr = importlib.import_module('problems.spec')", 2),
    ("patches-library", "import torch\ntorch.allclose = lambda *a: True", 2),
    ("patches-library", "import torch.distributed as d\nd.all_reduce = print", 2),
    ("patches-library", "from torch import Tensor as T\nT.copy_ = None", 2),
    ("patches-library", "import torch\nsetattr(getattr(torch, 'cuda'), 'synchronize', id)", 2),
    ("patches-library", "import time\nclock = time\nclock.perf_counter = lambda: 0.0", 3),
    ("torch-internals", "import torch\ntorch.cuda._sleep(100)", 2),
    ("torch-internals", "import torch as t\nwith t._C.DisableTorchFunctionSubclass(): pass", 2),
    ("tensor-subclass", "import torch\nclass L(torch.Tensor):\n    pass", 2),
    ("tensor-subclass", "class M:\n    def __torch_dispatch__(self, *a): pass", 2),
    ("odd-output", "def solution(x):\n    return x.to_sparse()", 2),
    ("odd-output", "import torch\ndef solution(x):\n    return torch.empty(4, device='meta')", 3),
    ("reads-proc", "def f(pid):\n    return f'/proc/{pid}/mem'", 2),
    ("reads-proc", "import os\np = os.path.join('/proc', 'self')", 2),
    ("host-paths", "p = '/dev/shm/x'", 1),
    ("file-access", "f = open('x')", 1),
    ("file-access", "import io\nreader = io.open\nf = reader('x')", 3),
    ("file-access", "from glob import glob as g\nfiles = g('*')", 2),
    ("environment", "import os\nkey = os.environ['HOME']", 2),
    ("environment", "from os import getenv as ge\nge('X')", 2),
    ("threads-and-processes", "import threading\nthreading.Thread(target=print).start()", 2),
    ("threads-and-processes", "from os import fork as f\nf()", 2),
    ("threads-and-processes", "import subprocess as sp\nsp.run(['ls'])", 2),
    ("signals-and-exits", "import os\nos._exit(0)", 2),
    ("signals-and-exits", "from signal import signal as on\non(10, print)", 2),
    ("network", "import socket", 1),
    ("network", "from urllib import request as r\nr.urlopen('http://x')", 2),
    ("native-memory", "import ctypes\nlibc = ctypes.CDLL(None)", 2),
    ("native-memory", "m = __import__('mmap')", 1),
    ("dynamic-code", "exec('x = 1')", 1),
    ("dynamic-code", "import importlib\nname = 'o' + 's'\nm = importlib.import_module(name)", 3),
    ("std-streams", "import sys\nsys.stdout.write('x')", 2),
    ("std-streams", "from sys import stderr as e\ne.write('x')", 2),
    ("clock", "import time\ndef solution(x):\n    return time.monotonic()", 1),
    ("clock", "from time import perf_counter as pc\nt = pc()", 1),
    ("cache-by-identity", "C = {}\ndef solution(x):\n    return C.get(x.data_ptr())", 3),
    ("cache-by-identity", "C = {}\ndef solution(x):\n    k = id(x)\n    C[k] = x", 4),
    (
        "cache-by-identity",
        "import hashlib as h\nS = {}\ndef solution(x):\n    k = h.sha1(x).hexdigest()\n"
        "    if k in S:\n        return 0",
        5,
    ),
    ("replays-kept-output", "STATE = {}\ndef solution(x):\n    return STATE['last']", 3),
    ("replays-kept-output", "Q = list()\ndef solution(x):\n    return Q.pop(0)", 3),
    ("counts-calls", "N = [0]\ndef solution(x):\n    N[0] += 1", 3),
    ("counts-calls", "n = 0\ndef solution(x):\n    global n\n    n += 1", 4),
    ("input-scribble", "def solution(x):\n    x.zero_()", 2),
    ("input-scribble", "def solution(a, b):\n    b.fill_(0)", 2),
    ("endless-loop", "def solution(x):\n    while True:\n        pass", 2),
    ("endless-loop", "def solution(x):\n    while 1:\n        x = x + 1", 2),
    ("large-constant-size", "def solution(x):\n    return x[:1].expand(1 << 34)", 2),
    ("large-constant-size", "import torch as t\nh = t.ones(700 * 2**20)", 2),
    ("large-constant-size", "h = bytearray(64 * 1024**3)", 1),
]


@pytest.mark.parametrize(("rule", "source", "line"), CAUGHT)
def test_each_rule_finds_its_pattern_under_any_name(rule, source, line):
    found = {(f.rule, f.line) for f in precheck_source(source)}
    assert (rule, line) in found, precheck_source(source)


def test_every_rule_has_a_case_above():
    assert {rule.id for rule in load_rules()} == {rule for rule, _, _ in CAUGHT}


HONEST = [
    # A pointer compared, not used as a key; a loop with a way out; a size from the inputs.
    "def solution(x, y):\n    same = x.data_ptr() == y.data_ptr()\n    return same",
    "def solution(x):\n    while True:\n        if x.sum() > 0:\n            break\n    return x",
    "def solution(x):\n    return x[:1].expand(x.numel(), 4)",
    "import torch\ntorch.backends.cuda.matmul.allow_tf32 = True",
    '"""Reads nothing under /proc."""\ndef solution(x):\n    """Not /tmp either."""\n    return x',
    "from evaluator.runtime import symm_buffer\ndef solution(x):\n    return x",
    "def solution(x):\n    out = x.clone()\n    out.zero_()\n    return out",
    "import torch\nprint(torch.__version__)",
]


@pytest.mark.parametrize("source", HONEST)
def test_honest_near_misses_are_not_flagged(source):
    assert precheck_source(source) == []


def test_a_problem_has_the_findings_of_the_helpers_it_imports_and_no_others():
    files = {
        "a.py": b"from _mid import f\ndef solution(x):\n    return f(x)\n",
        "b.py": b"def solution(x):\n    return x\n",
        "_mid.py": b"import _deep\nf = _deep.f\n",
        "_deep.py": b"import gc\ndef f(x):\n    gc.get_objects()\n    return x\n",
        "_unused.py": b"import socket\n",
    }
    found = precheck_files(files, {"a": "a.py", "b": "b.py"})
    assert [str(f) for f in found["a"]] == [
        "frame-introspection at _deep.py:3: reads the interpreter's frames, objects or "
        "modules: gc.get_objects"
    ]
    assert found["b"] == []


def test_patching_the_bundles_own_module_is_not_a_finding():
    files = {"a.py": b"import _h\n_h.SIZE = 4\ndef solution(x):\n    return x\n", "_h.py": b""}
    assert precheck_files(files, {"a": "a.py"}) == {"a": []}


def test_findings_per_problem_are_bounded():
    source = "import gc\n" + "gc.get_objects()\n" * 500
    assert len(precheck_source(source)) == 50


def test_a_rule_naming_no_check_fails_loudly(tmp_path):
    rules = tmp_path / "rules.toml"
    rules.write_text('[[rule]]\nid = "x"\nwhat = "w"\nwhy = "y"\ncheck = "nothing"\n')
    with pytest.raises(ValueError, match="no check named 'nothing'"):
        load_rules(rules)


def test_the_host_judges_a_flagged_problem_and_its_result_carries_the_findings():
    files = {"pc-honest.py": attacks.HONEST, "pc-sleepy.py": sleeping_solution(0.001)}
    catalog = {name[:-3]: attacks.problem(name[:-3]) for name in files}
    settings = small_settings(
        "precheck-secret-0123456789", warmup=1, iters=2, rounds=2, problem_timeout_s=60
    )
    results = judge_files(files, catalog, settings, "precheck")
    honest, sleepy = results["pc-honest"], results["pc-sleepy"]
    assert honest.status == ProblemStatus.PASSED and honest.review == []
    assert sleepy.status == ProblemStatus.PASSED, sleepy.message
    assert [(f["rule"], f["path"]) for f in sleepy.review] == [
        ("clock", "pc-sleepy.py"),
        ("clock", "pc-sleepy.py"),
    ]
    assert sleepy.flags == []  # the host only reports; the portal holds it for review
