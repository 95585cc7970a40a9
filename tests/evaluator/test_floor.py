"""`python -m evaluator.floor --calibrate` on real gloo rank processes: the reference
judged as the candidate, every pair of rounds recorded with the parent's own clock."""

from __future__ import annotations

import json
import socket

from evaluator import floor
from tests.evaluator.scratch import reachable_folder


def test_the_clock_calibration_writes_every_pair_of_rounds(monkeypatch):
    with reachable_folder("floor") as folder:
        monkeypatch.setenv("PKB_SEED_SECRET", "floor-secret-0123456789")
        monkeypatch.setenv("PKB_SCRATCH_DIR", str(folder))
        out = folder / "out"
        assert (
            floor.main(
                [
                    "--calibrate",
                    "--profile",
                    "cpu",
                    "--world-size",
                    "2",
                    "--rounds",
                    "3",
                    "--out",
                    str(out),
                ]
            )
            == 0
        )
        report = json.loads((out / "clock.json").read_text())
        markdown = (out / "clock.md").read_text()
    assert report["backend"] == "gloo" and report["world_size"] == 2
    assert [p["case"] for p in report["rounds"]] == ["n=1024"] * 3 + ["n=16384"] * 3
    for pair in report["rounds"]:
        assert pair["reference_us"] > 0 and pair["candidate_us"] > 0
        # The parent saw more than the calls: inputs, copies, digests, messages.
        assert 0 < pair["reference_overhead_s"] < pair["reference_observed_s"]
        assert 0 < pair["candidate_overhead_s"] < pair["candidate_observed_s"]
        assert pair["needed_s"] >= 0
    assert report["margin_s"]["suggested_margin_s"] > 0
    assert "Suggested PKB_CLOCK_MARGIN_S=" in markdown


def test_the_floor_command_runs_over_gloo(monkeypatch):
    """The GPU command's every path (the ranks it starts, the three ways of timing, the
    whole evaluator), tried on CPU: the numbers of gloo mean nothing here."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with reachable_folder("floor-cpu") as folder:
        monkeypatch.setenv("PKB_SEED_SECRET", "floor-secret-0123456789")
        monkeypatch.setenv("PKB_SCRATCH_DIR", str(folder))
        out = folder / "out"
        argv = ["--cpu", "--iters", "5", "--port", str(port), "--out", str(out)]
        assert floor.main(argv) == 0
        report = json.loads((out / "floor.json").read_text())
        markdown = (out / "floor.md").read_text()
    assert {(line["solution"], line["n"]) for line in report["lines"]} == {
        (name, n) for name in ("all-reduce reference", "empty (copy)") for n in floor.CPU_SIZES
    }
    for line in report["lines"]:
        assert line["events_us"] > 0 and line["rounds_us"] > 0 and line["former_us"] > 0
    # The copy reuses one output buffer for every call: its commitments hold all the same.
    assert [(r["status"], r["flags"]) for r in report["evaluator"]] == [("passed", [])] * 2
    assert all(len(r["cases"]) == len(floor.CPU_SIZES) for r in report["evaluator"])
    assert "| rounds - events |" in markdown
