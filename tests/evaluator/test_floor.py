"""`python -m evaluator.tools.floor` on real gloo rank processes: same code judged against
itself, and the floor's every path (numbers of gloo mean nothing here)."""

from __future__ import annotations

import argparse
import json

import pytest

from evaluator.judge.stats import median_interval
from evaluator.tools import floor, floor_events, floor_report
from tests.evaluator.scratch import reachable_folder


def test_same_code_on_both_sides_writes_every_pair_and_its_speedups(monkeypatch):
    with reachable_folder("floor") as folder:
        monkeypatch.setenv("PKB_SEED_SECRET", "floor-secret-0123456789")
        monkeypatch.setenv("PKB_SCRATCH_DIR", str(folder))
        out = folder / "out"
        argv = ["--calibrate", "--profile", "cpu", "--world-size", "2", "--rounds", "3"]
        assert floor.main([*argv, "--out", str(out)]) == 0
        report = json.loads((out / "clock.json").read_text())
        markdown = (out / "clock.md").read_text()
    assert report["backend"] == "gloo" and report["world_size"] == 2
    assert [p["case"] for p in report["rounds"]] == ["n=1024"] * 3 + ["n=16384"] * 3
    for pair in report["rounds"]:
        # Net of the harness's own time (the tare), never below a share of the gross.
        assert 0 < pair["reference_us"] <= pair["reference_gross_us"]
        assert 0 < pair["candidate_us"] <= pair["candidate_gross_us"]
        assert pair["harness_us"] > 0
    assert [c["pairs"] for c in report["cases"]] == [3, 3]
    for case in report["cases"]:
        assert case["low"] <= case["median"] <= case["high"]
        # Three pairs, the first side alternating: each side went first and second.
        assert all(v > 0 for v in case["by_position"].values()), case["by_position"]
        assert len(case["by_position"]) == 4
    assert "| n=1024 | 3 |" in markdown and "| speedup |" in markdown
    assert "| case | reference first | reference second |" in markdown


def test_the_floor_command_runs_over_gloo(monkeypatch):
    """The GPU command's every path (the ranks it starts, the events taken alone and
    beside the evaluator's pairs, the whole evaluator at two round lengths), on CPU."""
    with reachable_folder("floor-cpu") as folder:
        monkeypatch.setenv("PKB_SEED_SECRET", "floor-secret-0123456789")
        monkeypatch.setenv("PKB_SCRATCH_DIR", str(folder))
        out = folder / "out"
        argv = ["--cpu", "--iters", "5", "--bursts", "2", "--rounds", "2", "--calls", "3,6"]
        argv += ["--repeats", "2"]
        assert floor.main([*argv, "--out", str(out)]) == 0
        report = json.loads((out / "floor.json").read_text())
        markdown = (out / "floor.md").read_text()
    assert {(line["solution"], line["n"]) for line in report["lines"]} == {
        (name, n) for name in floor_events.SOLUTIONS for n in floor_events.CPU_SIZES
    }
    assert (report["repeats"], report["bursts"]) == (2, 2)
    for line in report["lines"]:
        assert line["events_us"] > 0 and line["fresh_us"] > 0
        # Three takes of the events around two evaluator passes, each pass held against
        # the takes on either side of it.
        takes = line["events_takes_us"]
        assert len(takes) == 3
        for calls in (3, 6):
            assert line[f"evaluator_{calls}_us"] > 0 and line[f"harness_{calls}_us"] > 0
            passes = line[f"evaluator_passes_{calls}_us"]
            gaps = [p - (a + b) / 2 for p, a, b in zip(passes, takes, takes[1:], strict=False)]
            assert line[f"gap_takes_{calls}_us"] == pytest.approx(sum(gaps) / 2)
            # The gap: over every pair (two per case and pass), each less the burst of
            # events taken right after it.
            assert line[f"gap_{calls}_pairs"] == 4
            assert line[f"events_beside_{calls}_us"] > 0
            low, high = line[f"gap_{calls}_interval_us"]
            assert low <= line[f"gap_{calls}_us"] <= high
    assert "| evaluator, 3 calls a round | events beside | - events beside (pairs) |" in markdown


@pytest.mark.parametrize(
    ("gaps", "said"),
    [
        ([1.0, 2.0, 4.0], "met"),
        ([6.0, 7.0, 9.0], "NOT met"),
        ([-8.0, 2.0, 12.0], "met, within noise"),
        ([-8.0, 6.0, 12.0], "NOT met, within noise"),
    ],
)
def test_a_line_whose_passes_fall_on_both_sides_of_the_goal_says_so(gaps, said):
    """Goal here: 5 us (15% of 20 us is less). The median decides met or not; a range of
    the passes' gaps across the goal adds that it is within the passes' noise."""
    line = {"events_us": 20.0, "gap_10_us": gaps[1], "gap_10_interval_us": [gaps[0], gaps[2]]}
    assert floor_report.verdict(line, 10) == said
    assert floor_report.verdict({"events_us": 20.0}, 10) == "NOT met"  # no evaluator line


@pytest.mark.parametrize(
    ("nets", "repeats", "decided"),
    [([20.0, 21.0, 22.0, 23.0], 2, True), ([20.0, 40.0, 21.0, 39.0], 4, False)],
    ids=["decided", "capped"],
)
def test_passes_are_added_while_a_line_is_within_noise_up_to_the_cap(
    monkeypatch, nets, repeats, decided
):
    """The loop alone, its measurements stood in for (the command's real paths: above):
    events of 20 us, so a goal of 5 us, and one pair a pass with 20 us beside it; gaps of
    0 and 1 us decide at the least two passes, gaps of 0 and 20 us straddle the goal and
    passes go on to the cap of four."""
    readings = iter(nets)

    def events(world, args):
        return [{"solution": "s", "n": 1, "events_us": 20.0, "fresh_us": 20.0}]

    def evaluator(world, args, calls):
        net = next(readings)
        return {("s", 1): floor.Pass(net, 5.0, [net], [20.0])}

    monkeypatch.setattr(floor, "_events_lines", events)
    monkeypatch.setattr(floor, "_through_the_evaluator", evaluator)
    args = argparse.Namespace(
        world_size=1, cpu=True, calls="10", repeats=2, max_repeats=4, iters=5, bursts=2
    )
    report = floor.floor(args)
    assert (report["repeats"], report["decided"]) == (repeats, decided)
    line = report["lines"][0]
    assert len(line["evaluator_passes_10_us"]) == repeats
    gaps = [net - 20.0 for net in nets[:repeats]]
    assert [line["gap_10_us"], *line["gap_10_interval_us"]] == list(median_interval(gaps))
