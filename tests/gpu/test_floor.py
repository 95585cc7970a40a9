"""`python -m evaluator.floor` on real GPUs: the harness's floor against back-to-back
events (`pytest -m gpu tests/gpu/test_floor.py`; two ranks, or one on a host of one GPU)."""

from __future__ import annotations

import json

import pytest
import torch

from evaluator import floor

GPUS = torch.cuda.device_count() if torch.cuda.is_available() else 0
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(GPUS < 1, reason="needs CUDA GPUs")]
WORLD = min(GPUS, 2)


def test_the_floor_command_times_every_size_every_way(tmp_path):
    assert floor.main(["--out", str(tmp_path), "--iters", "20", "--world-size", str(WORLD)]) == 0
    report = json.loads((tmp_path / "floor.json").read_text())
    assert {(line["solution"], line["n"]) for line in report["lines"]} == {
        (name, n) for name in ("all-reduce reference", "empty (copy)") for n in floor.GPU_SIZES
    }
    for line in report["lines"]:
        assert 0 < line["events_us"] and 0 < line["rounds_us"] and 0 < line["former_us"]
    assert all(r["status"] == "passed" and not r["flags"] for r in report["evaluator"])
    markdown = (tmp_path / "floor.md").read_text()
    assert "| rounds - events |" in markdown
    assert ("One rank" in markdown) == (WORLD == 1)
