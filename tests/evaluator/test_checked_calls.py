"""Commit, then reveal: the round protocol's rules and the digests, on their own (end to
end: tests/redteam)."""

from __future__ import annotations

import pytest
import torch
from evaluator.ranks import plain_output

from evaluator.judge.evaluate import _Commit
from evaluator.judge.pool import ProtocolViolation, Reply
from evaluator.tools.timing import digest, digest_values, median_interval, round_time


def commit(rank: int, digests: list, kind: str = "candidate") -> Reply:
    return Reply(kind, rank, {"step": 7, "ask": "commit", "digests": digests})


def reply(rank: int, times: list, kind: str = "candidate") -> Reply:
    return Reply(kind, rank, {"step": 7, "ok": True, "times_us": times})


def test_each_rank_commits_once_and_is_then_told_the_checked_calls():
    round_ = _Commit([3, 1], calls=6, warmup=2, kind="candidate")
    for rank in (0, 1):
        assert round_.answer(commit(rank, [[rank, 0]] * 4)) == [1, 3]
        round_.check_reply(reply(rank, [1.0] * 6))
    assert round_.digests[1] == [[1, 0]] * 4
    assert set(round_.committed_at) == {0, 1}


def test_a_second_commitment_or_one_of_the_wrong_size_is_a_violation():
    round_ = _Commit([0], calls=3, warmup=1, kind="candidate")
    with pytest.raises(ProtocolViolation, match="something else than 2 digests"):
        round_.answer(commit(0, [[0, 0]] * 3))
    round_.answer(commit(0, [[0, 0]] * 2))
    with pytest.raises(ProtocolViolation, match="where one commitment was due"):
        round_.answer(commit(0, [[0, 0]] * 2))
    with pytest.raises(ProtocolViolation):
        round_.answer(commit(1, [[0, 0]] * 2, kind="judge"))  # not the pool being timed
    with pytest.raises(ProtocolViolation):
        round_.answer(Reply("candidate", 1, {"step": 7, "ask": "checked", "call": 0}))


def test_the_reply_counts_only_after_the_commitment_and_with_every_time():
    round_ = _Commit([], calls=3, warmup=1, kind="candidate")
    with pytest.raises(ProtocolViolation, match="replied before committing"):
        round_.check_reply(reply(0, [1.0] * 3))
    round_.answer(commit(0, [[0, 0]] * 2))
    for times in ([1.0] * 2, [1.0, 1.0, -1.0], [1.0, 1.0, float("nan")], "fast"):
        with pytest.raises(ProtocolViolation, match="something else than 3 call times"):
            round_.check_reply(reply(0, times))
    round_.check_reply(Reply("candidate", 1, {"ok": False, "error": "boom"}))  # any time
    round_.check_reply(Reply("judge", 0, {"ok": True}))  # the judge's check commits nothing


def test_a_digest_is_the_same_wherever_and_however_the_output_is_laid_out():
    x = torch.randn(1001)
    assert digest(x).tolist() == digest(x.clone()).tolist()
    assert digest(x.view(7, 143).t()).tolist() == digest(x.view(7, 143).t().contiguous()).tolist()
    assert digest_values([digest(x), digest((x, x[:3]))]) == [
        digest(x).tolist(),
        digest(x).tolist() + digest(x[:3]).tolist(),
    ]
    for odd in (torch.ones(3, dtype=torch.bool), torch.arange(5, dtype=torch.uint8), x[:1]):
        assert len(digest(odd)) == 2


def test_a_digest_tells_outputs_apart_that_sums_over_elements_do_not():
    x = torch.randn(1000)
    swapped = x.clone()
    swapped[[0, 600]] = x[[600, 0]]  # the same elements, a wrong place: sums agree
    assert digest(swapped)[0] == digest(x)[0]
    assert digest(swapped).tolist() != digest(x).tolist()
    y = x.clone()
    y[5] = torch.nextafter(y[5], torch.tensor(10.0))  # one bit
    assert digest(y).tolist() != digest(x).tolist()


def test_a_round_time_is_the_mean_of_the_slowest_rank_per_call():
    # A mean, so that work moved into one call of a batch counts in full.
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
        (torch.ones(2).as_subclass(Sub), False),
        ((torch.ones(2).as_subclass(Sub),), False),
        (Pair((torch.ones(2),)), False),
        (FakeTopk((torch.ones(2),)), False),
        (torch.nn.Parameter(torch.ones(2)), False),
        (3.0, False),
    ],
)
def test_only_plain_tensors_and_containers_are_accepted(out, plain):
    assert plain_output(out) is plain
