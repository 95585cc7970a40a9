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
    ends: list[int] = field(default_factory=list)  # where each call's inputs end

    def inputs_of(self, call: int) -> tuple[int, int]:
        """The bytes of call `call`'s inputs: written into the arena at its turn only."""
        return (self.ends[call - 1] if call else 0), self.ends[call]


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

    def take(self, base: torch.Tensor, call: int, output: Output, checked: bool) -> None:
        """A call's outputs, copied out of the arena before the next call's inputs go in;
        kept when the call is checked. Every call's are copied alike, so the time between
        a report and the next call's doorbell tells no runner which calls are checked."""
        copies = [arena.view(base, slot).clone() for slot in output.slots]
        if checked:
            self.copies[call] = copies[0] if output.kind == "tensor" else tuple(copies)

    def read(
        self,
        base: torch.Tensor,
        call: int,
        entry: dict[str, Any],
        room: tuple[int, int],
        expected: Round | None,
        checked: bool,
    ) -> None:
        """One call's report, as the call ends: the reference's gives its outputs' slots;
        the candidate's is held against the reference's (and parsed as the reference's
        is first, so both sides' rounds hold the same work of the judge), its outputs
        read at the reference's slots."""
        if expected is None:
            output = replies.reference_output(entry, *room)
            self.outputs_by_call[call] = output
        else:
            with contextlib.suppress(ReplyError):
                replies.reference_output(entry, *room)
            output = expected.outputs[call]
            why = replies.mismatch(entry, output)
            if why:
                self.mismatches[call] = why
                return
        if not output.need:
            self.take(base, call, output, checked)

    def provisional(
        self,
        base: torch.Tensor,
        call: int,
        entry: dict[str, Any],
        room: tuple[int, int],
        expected: Round | None,
        checked: bool,
    ) -> None:
        """A candidate's report before the reference has run: kept to be compared, and
        its outputs copied from the slots it names inside its room. A report that is no
        reference's report is left to the comparison (a wrong answer, not a protocol
        error: a solution may return anything); one that asks for more room than the
        room is short (`candidate_first` then calls it a wrong answer)."""
        self.entries[call] = entry
        try:
            output = replies.reference_output(entry, *room)
        except ReplyError:
            return
        if output.need:
            self.short = True
        else:
            self.take(base, call, output, checked)


def stage(
    problem: Problem, case: Case, seeds: list[int], rank: int, world_size: int, device: torch.device
) -> Staged:
    """Every call's inputs, made by the judge from their seeds, in one buffer of the
    arena's layout: a round writes each call's part at that call's turn."""
    layouts, tensors, ends, end = [], [], [], 0
    for seed in seeds:
        ctx = InputContext(
            rank=rank, world_size=world_size, dtype=case.dtype, device=device, seed=seed
        )
        layout, items, end = arena.call_layout(problem.make_inputs(case, ctx), end)
        layouts.append(layout)
        tensors.append(items)
        ends.append(end)
    staging = torch.empty(end, dtype=torch.uint8, device=device)
    for layout, items in zip(layouts, tensors, strict=True):
        for slot, tensor in zip(input_slots(layout), items, strict=True):
            arena.view(staging, slot).copy_(tensor)
    return Staged(staging, layouts, end, ends)


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
        # A pass reports the largest of each over every element compared (compare.py).
        worst["max_abs_err"] = max(worst["max_abs_err"], got.max_abs_err)
        worst["max_rel_err"] = max(worst["max_rel_err"], got.max_rel_err)
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
