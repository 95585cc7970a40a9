"""`python -m evaluator.tools.floor` on real GPUs: the harness's floor against back-to-back
events (`pytest -m gpu tests/gpu/test_floor.py`; two ranks, or one on a host of one GPU)."""

from __future__ import annotations

import json

import pytest
import torch

from evaluator.tools import floor, floor_events

GPUS = torch.cuda.device_count() if torch.cuda.is_available() else 0
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(GPUS < 1, reason="needs CUDA GPUs")]
WORLD = min(GPUS, 2)


def test_the_floor_command_times_every_size_every_way(tmp_path):
    argv = ["--out", str(tmp_path), "--iters", "20", "--rounds", "3", "--calls", "10"]
    assert floor.main([*argv, "--world-size", str(WORLD)]) == 0
    report = json.loads((tmp_path / "floor.json").read_text())
    assert {(line["solution"], line["n"]) for line in report["lines"]} == {
        (name, n) for name in floor_events.SOLUTIONS for n in floor_events.GPU_SIZES
    }
    for line in report["lines"]:
        assert 0 < line["events_us"] and 0 < line["evaluator_10_us"] and 0 < line["harness_10_us"]
        assert 0 < line["events_beside_10_us"] and line["gap_10_pairs"] == 3 * report["repeats"]
    markdown = (tmp_path / "floor.md").read_text()
    assert "| evaluator, 10 calls a round |" in markdown
    assert ("One rank" in markdown) == (WORLD == 1)
