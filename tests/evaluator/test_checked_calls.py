"""The checked-call protocol's rules, on their own (end to end: tests/redteam)."""

from __future__ import annotations

import pytest
import torch

from evaluator.pool import ProtocolViolation, Reply
from evaluator.ranks import plain_output
from evaluator.runner import _CheckedCalls


def ask(rank: int, call: int, kind: str = "candidate") -> Reply:
    return Reply(kind, rank, {"step": 7, "ask": "checked", "call": call})


def test_each_rank_is_told_call_by_call_which_calls_are_checked():
    checks = _CheckedCalls([1, 3], calls=4, kind="candidate")
    for rank in (0, 1):
        answers = [checks.answer(ask(rank, call)) for call in range(4)]
        assert answers == [[0, False], [1, True], [2, False], [3, True]]
    checks.check_reply(Reply("candidate", 0, {"ok": True}))


def test_a_question_out_of_turn_is_a_violation():
    checks = _CheckedCalls([1], calls=4, kind="candidate")
    checks.answer(ask(0, 0))
    with pytest.raises(ProtocolViolation, match="where call 1 was due"):
        checks.answer(ask(0, 0))  # asked twice
    with pytest.raises(ProtocolViolation, match="where call 0 was due"):
        checks.answer(ask(1, 2))  # asked ahead
    with pytest.raises(ProtocolViolation):
        checks.answer(ask(2, 0, kind="judge"))  # not the pool being timed


def test_the_loop_reply_counts_only_after_every_call():
    checks = _CheckedCalls([3], calls=4, kind="candidate")
    checks.answer(ask(0, 0))
    with pytest.raises(ProtocolViolation, match="replied after 1 of 4 timed calls"):
        checks.check_reply(Reply("candidate", 0, {"ok": True, "times_us": [1.0] * 4}))
    checks.check_reply(Reply("candidate", 0, {"ok": False, "error": "boom"}))  # failures: any time
    checks.check_reply(Reply("judge", 0, {"ok": True}))  # the judge's check is not asked


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
