"""What crosses the trust boundary, on its own: the arena's format, a runner's reply read
as data, and the statistics of pairs (end to end: tests/redteam)."""

from __future__ import annotations

import math

import pytest
import torch

from evaluator.candidate import arena
from evaluator.candidate.arena import LayoutError, Slot
from evaluator.candidate.runner import place
from evaluator.judge import replies
from evaluator.judge.replies import Output, ReplyError
from evaluator.judge.stats import crossover_blocks, median_interval, round_time, speedup_interval

LIMIT = 1 << 20


def test_a_slot_from_data_must_lie_inside_the_arena():
    assert Slot.from_json([256, "float32", [4, 8]], limit=LIMIT) == Slot(256, "float32", (4, 8))
    for hostile in (
        [0, "float32", [1 << 40]],  # far past the end
        [100, "float32", [4]],  # unaligned
        [-256, "float32", [4]],
        [0, "object", [4]],
        [0, "float32", [4] * 9],  # too many dimensions
        [0, "float32", [-1]],
        [0.0, "float32", [4]],
        [True, "float32", [4]],
        "not a slot",
    ):
        with pytest.raises(LayoutError):
            Slot.from_json(hostile, limit=LIMIT)


def test_inputs_go_into_aligned_slots_and_come_back_as_views():
    base = torch.zeros(LIMIT, dtype=torch.uint8)
    inputs = {"x": torch.arange(10, dtype=torch.float32), "k": 3, "y": torch.ones(3, 2)}
    layout, tensors, end = arena.call_layout(inputs, 0)
    assert layout["k"] == ["value", 3] and end % arena.ALIGN == 0
    for name, tensor in zip(("x", "y"), tensors, strict=True):
        arena.view(base, Slot.from_json(layout[name][1], limit=LIMIT)).copy_(tensor)
    got = arena.call_inputs(base, layout)
    assert (
        got["k"] == 3 and torch.equal(got["x"], inputs["x"]) and torch.equal(got["y"], inputs["y"])
    )
    got["x"].fill_(7)  # a view: a runner's writes land in the arena
    assert torch.equal(arena.call_inputs(base, layout)["x"], torch.full((10,), 7.0))


class Sub(torch.Tensor):
    pass


class Pair(tuple):
    pass


class FakeTopk(tuple):
    __module__ = "torch.return_types"


@pytest.mark.parametrize(
    "out, plain",
    [
        (torch.ones(2), True),
        ((torch.ones(2), torch.zeros(1)), True),
        ([torch.ones(2)], True),
        (torch.topk(torch.arange(4.0), 2), True),  # torch.return_types.topk
        (torch.ones(2).expand(5, 2), True),  # zero strides: copied into its room as values
        (torch.ones(2).as_subclass(Sub), False),
        ((torch.ones(2).as_subclass(Sub),), False),
        (Pair((torch.ones(2),)), False),
        (FakeTopk((torch.ones(2),)), False),
        (torch.nn.Parameter(torch.ones(2)), False),
        (torch.ones(2).to_sparse(), False),
        (torch.empty(2, device="meta"), False),
        (torch.ones(2, dtype=torch.float32).to(torch.complex64).real, True),
        (3.0, False),
    ],
)
def test_only_plain_strided_tensors_and_containers_have_slots(out, plain):
    assert (arena.describe(out) is not None) is plain


def reference(kind="tensor", items=(("float32", [4]),), offset=4096, room=4096) -> Output:
    entry = {"kind": kind, "items": [list(i) for i in items]}
    return replies.reference_output(entry, offset, room)


def test_the_reference_report_gives_slots_inside_its_room():
    out = reference("tuple", items=(("float32", [4]), ("int64", [2, 3])))
    assert [s.offset for s in out.slots] == [4096, 4352] and not out.need
    assert reference(items=(("float32", [2048]),)).need == 8192  # it asks for a larger room
    for hostile in (
        {"kind": "tensor", "items": [["float32", [1]], ["float32", [1]]]},
        {"kind": "generator", "items": []},
        {"kind": "tensor", "items": [["object", [1]]]},
        {"kind": "tensor", "items": [["float32", [1 << 62, 1 << 62]]]},
        {"foreign": "str"},
    ):
        with pytest.raises(ReplyError):
            replies.reference_output(hostile, 4096, 4096)


def test_a_candidate_report_is_only_held_against_the_reference():
    expected = reference()
    assert replies.mismatch({"kind": "tensor", "items": [["float32", [4]]]}, expected) == ""
    for entry, why in (
        ({"kind": "tensor", "items": [["float32", [1 << 40]]]}, "float32(1099511627776,)"),
        ({"kind": "tuple", "items": [["float32", [4]]]}, "a tuple of (float32(4,))"),
        ({"kind": "tensor", "items": [["bfloat16", [4]]]}, "bfloat16(4,)"),
        ({"foreign": "Lazy"}, "returned a Lazy"),
        ({"kind": "tensor", "items": "x" * 10_000}, "something else"),
        ({"kind": "tensor", "items": [["float32", [4]]], "device": "meta"}, "on meta"),
        ({"kind": "tensor", "items": [["float32", [4]]], "need": 1 << 50}, "larger"),
    ):
        assert why in replies.mismatch(entry, expected)


def test_text_from_a_runner_loses_its_control_characters_and_length():
    text = replies.clean("\x1b[2J\x1b]0;pwned\x07" + "a" * 1000)
    assert "\x1b" not in text and "\x07" not in text and len(text) == replies.MAX_TEXT
    with pytest.raises(ReplyError):
        replies.tampered({"tampered": "time.perf_counter"})
    assert replies.tampered({"tampered": ["x"] * 100}) == ["x"] * replies.MAX_TAMPERED


def test_a_runner_places_what_fits_and_says_what_does_not():
    base = torch.zeros(LIMIT, dtype=torch.uint8)
    assert place(base, torch.ones(4), 4096, 4096) == {"kind": "tensor", "items": [("float32", [4])]}
    assert torch.equal(arena.view(base, Slot(4096, "float32", (4,))), torch.ones(4))
    huge = torch.ones(1).expand(1 << 30)  # a zero-stride output of 4 GiB: nothing is copied
    assert place(base, huge, 4096, 4096)["need"] == 1 << 32
    assert place(base, torch.ones(2).to_sparse(), 0, 4096) == {"foreign": "Tensor"}


def test_a_round_time_is_the_mean_of_the_slowest_rank_per_call():
    assert round_time([[1.0, 10.0, 1.0], [2.0, 1.0, 1.0]]) == pytest.approx(13 / 3)
    with pytest.raises(ValueError):
        round_time([[1.0], [1.0, 2.0]])


@pytest.mark.parametrize(
    "n, low, high",
    [(3, 0, 2), (5, 0, 4), (6, 0, 5), (10, 1, 8), (20, 5, 14)],  # 0-based order statistics
)
def test_the_median_interval_is_between_binomial_order_statistics(n, low, high):
    values = [float(v) for v in range(n)]
    median, lo, hi = median_interval(values[::-1])
    assert median == pytest.approx((n - 1) / 2)
    assert (lo, hi) == (values[low], values[high])


def test_ranks_are_pinned_only_where_two_cores_a_rank_are_spare(monkeypatch):
    from evaluator import rank_process

    monkeypatch.setattr(rank_process.os, "sched_getaffinity", lambda pid: set(range(16)))
    assert rank_process.cores_for("judge", 0, 4, "gloo") == ()  # CPU hosts: never
    cores = {
        kind: [rank_process.cores_for(kind, r, 4, "nccl") for r in range(4)]
        for kind in ("judge", "reference", "candidate")
    }
    # Core 0 for the evaluating process; a rank's runners share one, its judge another.
    assert cores["reference"] == cores["candidate"] == [(2,), (4,), (6,), (8,)]
    assert cores["judge"] == [(1,), (3,), (5,), (7,)]
    assert rank_process.cores_for("judge", 0, 8, "nccl") == ()  # 17 cores needed


def test_a_judge_never_shares_a_physical_core_with_its_runners(monkeypatch, tmp_path):
    """Hyperthread siblings (as the kernel lists them) are one core: the judge, polling
    while a runner works, goes to another physical core."""

    from evaluator import rank_process

    for cpu in range(8):  # cores of two threads each: (0, 4), (1, 5), (2, 6), (3, 7)
        topology = tmp_path / f"cpu{cpu}" / "topology"
        topology.mkdir(parents=True)
        (topology / "thread_siblings_list").write_text(f"{cpu % 4},{cpu % 4 + 4}\n")
    cores = rank_process.physical_cores(list(range(8)), root=str(tmp_path))
    assert cores == [[0, 4], [1, 5], [2, 6], [3, 7]]
    assert rank_process._cpu_list("2-3,18-19\n") == [2, 3, 18, 19]
    monkeypatch.setattr(rank_process.os, "sched_getaffinity", lambda pid: set(range(8)))
    monkeypatch.setattr(rank_process, "physical_cores", lambda cpus: [list(c) for c in cores])
    # One rank: evaluator on core 0, judge on core 1, runners on core 2 (cpu 2, not 5).
    assert rank_process.cores_for("judge", 0, 1, "nccl") == (1,)
    assert rank_process.cores_for("candidate", 0, 1, "nccl") == (2,)
    # Two ranks need five cores of four: logical CPUs then, as without a topology.
    assert rank_process.cores_for("judge", 1, 2, "nccl") == (3,)
    assert rank_process.cores_for("reference", 1, 2, "nccl") == (4,)


def test_a_speedup_is_the_median_of_crossover_blocks():
    """Pairs of alternating order, two by two: an order effect e (the side that goes second
    slower by e) reads r*e and r/e; each block's geometric mean is r again."""
    true, effect = 1.25, 1.06
    ratios = [true * effect if k % 2 == 0 else true / effect for k in range(20)]
    assert crossover_blocks(ratios) == pytest.approx([true] * 10)
    speedup, low, high = speedup_interval(ratios)
    assert speedup == low == high == pytest.approx(true)
    # The median of the pairs themselves would sit on one cluster or between the two.
    assert median_interval(ratios)[1:] == pytest.approx((true / effect, true * effect))


def test_with_too_few_blocks_the_interval_is_the_range_of_the_pairs():
    ratios = [1.0, 1.2, 0.9, 1.1, 1.05]  # two blocks and a pair waiting for its partner
    speedup, low, high = speedup_interval(ratios)
    assert speedup == pytest.approx((math.sqrt(1.2) + math.sqrt(0.99)) / 2)
    assert (low, high) == (0.9, 1.2)
    assert speedup_interval([1.3]) == (1.3, 1.3, 1.3)  # one pair: its own block


def test_the_reported_interval_is_the_99_percent_one_and_pairs_settle_on_the_95():
    """Same-code runs covered 1.00 in 90% of nominal-95% intervals and all nominal-99%
    ones (stats.REPORTED): the 99% one is reported; the pairs a case takes follow the
    95% one, so that evaluations take no longer than before."""
    from evaluator.contract import CaseResult
    from evaluator.judge.stats import net_of_harness

    ratios = [1.0 + 0.004 * ((7 * k) % 11 - 5) for k in range(40)]  # 0.98 to 1.02, mixed
    wide, narrow = speedup_interval(ratios), speedup_interval(ratios, 0.95)
    assert wide[1] <= narrow[1] <= narrow[2] <= wide[2]
    assert (wide[1], wide[2]) != (narrow[1], narrow[2])
    result = CaseResult(case="c", dtype="bfloat16", passed=True)
    result.rounds = [
        {"reference_gross_us": 10.0 * r, "candidate_gross_us": 10.0, "tare_us": 0.0} for r in ratios
    ]
    net_of_harness(result, target_halfwidth=(narrow[2] - narrow[1]) / 2 / narrow[0] + 1e-9)
    assert (result.speedup_low, result.speedup_high) == pytest.approx((wide[1], wide[2]))
    assert result.settled  # on the 95% interval's width, though the 99% one is wider


def test_a_run_spread_widens_the_reported_interval_but_not_the_one_pairs_settle_on():
    """What more pairs cannot shrink (the same code read 3-7% apart from one run to the
    next on one H100) is added to the reported interval's halves on a log scale, in
    quadrature with the pairs' own; how many pairs a case takes still follows the pairs'
    own interval, which more pairs do narrow."""
    from statistics import NormalDist

    from evaluator.contract import CaseResult
    from evaluator.judge.stats import net_of_harness, with_run_spread

    z = NormalDist().inv_cdf(0.995)
    # A point interval widens by exactly z * spread each way.
    low, high = with_run_spread(1.2, 1.2, 1.2, 0.02, 0.99)
    assert (math.log(1.2 / low), math.log(high / 1.2)) == pytest.approx((z * 0.02, z * 0.02))
    # In quadrature: a half of 3% and a spread's 4% make 5%.
    low, high = with_run_spread(1.0, math.exp(-0.03), math.exp(0.03), 0.04 / z, 0.99)
    assert (low, high) == pytest.approx((math.exp(-0.05), math.exp(0.05)))
    assert with_run_spread(1.0, 0.9, 1.1, 0.0, 0.99) == (0.9, 1.1)  # none on CPU hosts

    ratios = [1.0 + 0.004 * ((7 * k) % 11 - 5) for k in range(40)]
    result = CaseResult(case="c", dtype="bfloat16", passed=True)
    result.rounds = [
        {"reference_gross_us": 10.0 * r, "candidate_gross_us": 10.0, "tare_us": 0.0} for r in ratios
    ]
    narrow = speedup_interval(ratios, 0.95)
    target = (narrow[2] - narrow[1]) / 2 / narrow[0] + 1e-9
    net_of_harness(result, target_halfwidth=target, run_spread=0.02)
    assert (result.speedup, result.speedup_low, result.speedup_high) == pytest.approx(
        speedup_interval(ratios, run_spread=0.02)
    )
    assert result.speedup_high / result.speedup_low > math.exp(2 * z * 0.02)
    assert result.settled  # on the pairs' own 95% interval
