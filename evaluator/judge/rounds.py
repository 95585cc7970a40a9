"""What a judge's round is made of: the staged inputs, what it read from a runner's reply
(`Round`, and how each call's report is read), the arena's rooms, and the pair's
verdict. Data and small functions only; the judge's process (`judge/rank.py`) drives the
rounds."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any

import torch

from evaluator.candidate import arena
from evaluator.candidate.arena import Slot
from evaluator.judge import replies
from evaluator.judge.compare import compare
from evaluator.judge.replies import Output, ReplyError
from problems.spec import Case, InputContext, Problem

# A reference round's rooms and what each call returned there: what an echo round returns.
Answers = tuple[list[tuple[int, int]], list[Output]]


@dataclass
class Staged:
    staging: torch.Tensor  # the judge's own: runners only ever see copies of it
    layouts: list[dict[str, Any]]
    end: int


@dataclass
class Round:
    seconds: float = 0.0
    outputs: list[Output] = field(default_factory=list)  # per call (the reference's)
    copies: dict[int, Any] = field(default_factory=dict)  # checked call -> its outputs
    mismatches: dict[int, str] = field(default_factory=dict)  # the candidate's, per call
    tampered: list[str] = field(default_factory=list)
    outputs_by_call: dict[int, Output] = field(default_factory=dict)
    rooms: list[tuple[int, int]] = field(default_factory=list)  # where the outputs went
    # A candidate's round before the reference's: its reports, to hold against the
    # reference's once it has run, and whether a room was short of what it reported.
    entries: dict[int, dict[str, Any]] = field(default_factory=dict)
    short: bool = False

    def copy(self, base: torch.Tensor, call: int, output: Output) -> None:
        """A checked call's outputs, copied out of the arena into the judge's memory."""
        copies = [arena.view(base, slot).clone() for slot in output.slots]
        self.copies[call] = copies[0] if output.kind == "tensor" else tuple(copies)

    def read(
        self,
        base: torch.Tensor | None,
        call: int,
        entry: dict[str, Any],
        room: tuple[int, int],
        expected: Round | None,
    ) -> None:
        """One call's report; with `base`, a copy of its outputs too (a checked call).
        A checked call of the candidate's has its report read as the reference's is,
        before the stop stamp, though only the comparison decides: both sides' rounds
        then hold the same work of the judge (9 us against 1 us of Python a checked
        call on the development machine, two checked calls a round)."""
        if expected is None:
            output = replies.reference_output(entry, *room)
            self.outputs_by_call[call] = output
        else:
            if base is not None:  # before the stop stamp: what the reference's report costs
                with contextlib.suppress(ReplyError):
                    replies.reference_output(entry, *room)
            output = expected.outputs[call]
            why = replies.mismatch(entry, output)
            if why:
                self.mismatches[call] = why
                return
        if base is not None and not output.need:
            self.copy(base, call, output)

    def provisional(
        self,
        base: torch.Tensor | None,
        call: int,
        entry: dict[str, Any],
        room: tuple[int, int],
        expected: Round | None = None,
    ) -> None:
        """A candidate's report before the reference has run: kept to be compared, and
        for a checked call its outputs copied from the slots it names inside its room.
        A report that is no reference's report is left to the comparison (a wrong
        answer, not a protocol error: a solution may return anything)."""
        self.entries[call] = entry
        try:
            output = replies.reference_output(entry, *room)
        except ReplyError:
            return
        if output.need:
            self.short = True
        elif base is not None:
            self.copy(base, call, output)


def stage(
    problem: Problem, case: Case, seeds: list[int], rank: int, world_size: int, device: torch.device
) -> Staged:
    """Every call's inputs, made by the judge from their seeds, in one buffer of the
    arena's layout: a round then writes them all with one copy."""
    layouts, tensors, end = [], [], 0
    for seed in seeds:
        ctx = InputContext(
            rank=rank, world_size=world_size, dtype=case.dtype, device=device, seed=seed
        )
        layout, items, end = arena.call_layout(problem.make_inputs(case, ctx), end)
        layouts.append(layout)
        tensors.append(items)
    staging = torch.empty(end, dtype=torch.uint8, device=device)
    for layout, items in zip(layouts, tensors, strict=True):
        for slot, tensor in zip(input_slots(layout), items, strict=True):
            arena.view(staging, slot).copy_(tensor)
    return Staged(staging, layouts, end)


def pair_verdict(
    problem: Problem, case: Case, ref: Round, cands: list[Round], checked: list[int]
) -> dict[str, Any]:
    """The first mismatch of any of the candidate's rounds (its own word: it returned
    something else than the reference), else the comparison of the timed round's checked
    calls with the reference's."""
    for cand in cands:
        if cand.mismatches:
            call, why = min(cand.mismatches.items())
            return {"ok": False, "message": f"call {call}: {why}", "output": call}
    worst: dict[str, Any] = {"ok": True, "max_abs_err": 0.0, "max_rel_err": 0.0}
    for i in checked:
        got = compare(ref.copies[i], cands[-1].copies[i], problem.tolerance(case.dtype))
        if not got.ok:
            return {**got.__dict__, "output": i}
        if got.max_abs_err >= worst["max_abs_err"]:
            worst = {**got.__dict__, "output": i}
    return worst


class RunnerFailed(Exception):
    def __init__(self, reply: dict[str, Any]) -> None:
        super().__init__(reply.get("error", "failed"))
        self.reply = reply


def failure(answer: dict[str, Any]) -> dict[str, Any]:
    """A runner's failure as the parent shows it: strings only, capped."""
    return {
        key: str(answer.get(key, ""))[:limit]
        for key, limit in (("phase", 16), ("error", 500), ("traceback", 8000))
    }


def input_slots(layout: dict[str, Any]) -> list[Slot]:
    return [Slot(v[1][0], v[1][1], tuple(v[1][2])) for v in layout.values() if v[0] == "slot"]


def ok(answer: dict[str, Any]) -> dict[str, Any]:
    if not answer.get("ok"):
        raise RunnerFailed(failure(answer))
    return answer


def rooms_after(staged: Staged, room: int) -> list[tuple[int, int]]:
    room = arena.aligned(room)
    return [(staged.end + i * room, room) for i in range(len(staged.layouts))]


def span(slots: list[Slot]) -> int:
    return slots[-1].end - slots[0].offset if slots else 0


def input_bytes(layout: dict[str, Any]) -> int:
    return sum(slot.nbytes for slot in input_slots(layout))
