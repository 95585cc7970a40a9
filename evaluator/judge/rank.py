"""A judge rank: the trusted process of one GPU (or CPU rank).

It never imports bundle code. For each command of the evaluator it draws the inputs of the
calls from their seeds (only it holds them), then runs a PAIR of rounds on the same inputs:
the reference's runner first, then the candidate's. Each round:

    "prepare" (the runner builds views of the arena) -> barrier of the judges ->
    start stamp -> inputs written into the arena -> "go": the runner calls and copies
    each output into its room -> the judge copies the checked calls' rooms -> stop stamp

The reference's runner says what each call returned (dtypes and shapes, checked against
its room); the candidate's report is only compared with it, and the judge reads the
candidate's bytes at the reference's slots: never a size or place the candidate chose.
The checked calls' outputs of the two rounds are compared (`rounds.pair_verdict`). A
tare round (the reference's runner returning the reference's outputs at once) measures
the harness; the candidate's runner ends its side with the same echo round, untimed. The
parent (`evaluator.judge.problem_run`) gets JSON: the rounds' times, the verdict, and the
candidate's failure if any.
"""

from __future__ import annotations

import contextlib
import os
import traceback
from multiprocessing import reduction
from multiprocessing.connection import Connection
from typing import Any

import torch

from evaluator import rank_process
from evaluator.judge import replies
from evaluator.judge.link import Clock, RunnerGone, RunnerLink, collector_paused
from evaluator.judge.profiling import profiled_pair
from evaluator.judge.replies import Output, ReplyError
from evaluator.judge.rounds import (
    Answers,
    Round,
    RunnerFailed,
    Staged,
    input_bytes,
    ok,
    pair_verdict,
    rooms_after,
    span,
    stage,
)
from evaluator.judge.turns import Turns
from evaluator.rank_process import RankSetup, describe, reply
from problems.spec import Case, Problem

# Room for a reference output before the judge knows its size: twice the call's inputs or
# twice the largest output of the case so far, at least this; a reference that needs more
# says so and its round is run again in a larger arena.
MIN_ROOM_BYTES = 64 * 1024
MAX_ROOM_RETRIES = 4
# How long a judge polls for a runner's reply to "go" before it blocks (GPU hosts).
SPIN_S = 0.05
# Timed calls per round (`_Judge.calls_for`): a round aims at lasting this long (the
# reference's), with inputs of at most this many bytes, and no fewer calls than this.
ROUND_TARGET_S = 0.02
ROUND_BYTES = 1 << 30
MIN_CALLS = 10


class VoidPair(Exception):
    """A pair whose candidate rounds ran in rooms the reference's outputs outgrew: it
    counts for nothing and is drawn again on fresh seeds (`candidate_first`)."""


def judge_main(conn: Connection, setup: RankSetup) -> None:
    device = rank_process.start(setup, untrusted=False)
    judge = _Judge(setup, device, conn)
    reply(conn, {"step": 0, "ok": True, "pid": os.getpid(), "pgid": os.getpgid(0)})
    while True:
        try:
            op, step, payload = conn.recv()
        except (EOFError, OSError):
            break  # the parent is gone
        if op == "stop":
            break
        reply(conn, {"step": step, **judge.handle(op, payload)})
    with contextlib.suppress(Exception):
        torch.distributed.destroy_process_group()


class _Judge:
    def __init__(self, setup: RankSetup, device: torch.device, conn: Connection) -> None:
        self.setup, self.device, self.conn = setup, device, conn
        self.reference = RunnerLink(setup.peers[0], device)
        self.candidate = RunnerLink(setup.peers[1], device)
        self.clock = Clock(device)
        self.problem: Problem | None = None
        self.largest_output: dict[str, int] = {}  # per case name, bytes of one call
        # Per case name, the rooms and outputs of the reference's last timed round: what
        # the candidate's echo round returns when it goes first (`candidate_first`).
        self.last_outputs: dict[str, Answers] = {}
        self.turns = Turns(setup.rank, setup.world_size, self.clock.meet)

    def handle(self, op: str, payload: Any) -> dict[str, Any]:
        try:
            if op == "load":
                self.problem, self.largest_output = payload["problem"], {}
                self.last_outputs = {}
                return {"ok": True}
            if op == "ping":
                return {"ok": True}
            if op == "runners":  # each stopped while the other's side runs (turns.py)
                self.turns.learn(payload)
                return {"ok": True}
            if op == "rewire":
                # A restarted candidate pool: its pipe's end comes over our socket.
                self.candidate.replace(Connection(reduction.recv_handle(self.conn)))
                return {"ok": True}
            if op == "profile":  # a profile run's pair (judge/profiling.py)
                return profiled_pair(self, payload)
            if op == "probe":
                from evaluator.tools.probe import measure_peer_bandwidth

                return {"ok": True, "bandwidth": measure_peer_bandwidth()}
            if op == "pair":
                case = Case.from_json(payload["case"])
                with collector_paused():
                    return self.pair(
                        case,
                        payload["seeds"],
                        payload["checked"],
                        payload["warmup"],
                        tare=payload.get("tare", True),
                        first=payload.get("first", "reference"),
                        fit=payload.get("fit", False),
                    )
            raise ValueError(f"unknown command {op!r}")
        except Exception as exc:
            traceback.print_exc()
            return {"ok": False, "error": describe(exc), "traceback": traceback.format_exc()}

    def pair(
        self,
        case: Case,
        seeds: list[int],
        checked: list[int],
        warmup: list[int],
        *,
        tare: bool,
        first: str = "reference",
        fit: bool = False,
    ) -> dict[str, Any]:
        """A pair of rounds on the same inputs, each side a warm-up round (`warmup` seeds,
        not timed, nothing checked) then its timed round: the reference's side first, or
        the candidate's (`first`: the parent alternates, so neither side always follows
        the other). Every input of the pair is made before either side runs, so both
        meet the same gaps. With `fit` (a case's first timed pair, reference first) the
        reference's warm-up round sizes the rounds: as many of `seeds` as `calls_for`
        allows (every judge the same number); the reply's "calls" says how many."""
        stages = [self.stage(case, warmup)] if warmup else []
        warm: list[Round] = []
        if fit and stages:
            with self.turns.reference_side():  # it sizes the rounds: no hog may stretch it
                warm = [self.reference_round(case, stages[0], [])]
            seeds = seeds[: self.calls_for(stages[0], warm[0], len(seeds))]
            checked = sorted({i % len(seeds) for i in checked})
            first = "reference"
        stages.append(self.stage(case, seeds))
        plans: list[list[int]] = [[] for _ in stages[:-1]] + [checked]
        answer: dict[str, Any] = {"ok": True, "calls": len(seeds), "first": first}
        try:
            if first == "candidate":
                refs, cands, harness_s = self.candidate_first(case, stages, plans, tare=tare)
            else:
                refs, harness_s = self.reference_rounds(case, stages, plans, warm, tare=tare)
                cands = self.candidate_rounds(stages, refs, plans, tare=tare)
        except VoidPair:
            return {**answer, "void": True}
        except RunnerGone as gone:
            return {**answer, "failure": {"how": gone.how, "protocol": gone.protocol}}
        except RunnerFailed as failed:
            return {**answer, "failure": failed.reply}
        answer["reference_s"] = refs[-1].seconds
        answer["candidate_s"] = cands[-1].seconds
        if harness_s is not None:  # timed pairs only: a trial's times are not kept
            answer["harness_s"] = harness_s
        answer["tampered"] = sorted({t for c in cands for t in c.tampered})
        assert self.problem is not None
        answer["verdict"] = pair_verdict(self.problem, case, refs[-1], cands, checked)
        return answer

    def reference_rounds(
        self,
        case: Case,
        stages: list[Staged],
        plans: list[list[int]],
        warm: list[Round],
        *,
        tare: bool,
    ) -> tuple[list[Round], float | None]:
        """The reference's side of a pair: its rounds (after `warm`, those already run)
        and, with `tare`, the tare's seconds, last in the side, as the candidate's side
        ends with its echo (`echo_last`). With the tare after both sides the candidate,
        first, followed the reference's runner and read 1-6% slower for it (H100,
        2026-11-26: docs/measurements/2026-11-26-tare-side.md)."""
        with self.turns.reference_side():
            refs = warm + [
                self.reference_round(case, staged, plan)
                for staged, plan in zip(stages[len(warm) :], plans[len(warm) :], strict=True)
            ]
            harness_s = self.tare(stages[-1], refs[-1]) if tare else None
        self.last_outputs[case.name] = (refs[-1].rooms, refs[-1].outputs)
        return refs, harness_s

    def candidate_rounds(
        self, stages: list[Staged], refs: list[Round], plans: list[list[int]], *, tare: bool
    ) -> list[Round]:
        """The candidate's rounds after the reference's: in the reference's rooms, each
        call's report held against the reference's, checked outputs read at its slots;
        with `tare`, its echo round last (`echo_last`)."""
        with self.turns.candidate_side():
            cands = [
                self.round(self.candidate, staged, ref.rooms, plan, expected=ref)
                for staged, ref, plan in zip(stages, refs, plans, strict=True)
            ]
            if tare:
                self.echo_last(stages[-1], (refs[-1].rooms, refs[-1].outputs), cands[-1])
        return cands

    def echo_last(self, staged: Staged, outputs: Answers, timed: Round) -> None:
        """The candidate's side ends as the reference's does, with an echo round of its
        runner (untimed: its time is the candidate's to move; what it flags is kept). Both
        runners then do the same work in the same order, in arenas of the same size: with
        the tare on the reference's side alone, the same code read 1.8-2.4% against the
        reference (H100, 2026-11-27: docs/measurements/2026-11-27-echo-both-sides.md)."""
        echo = self.echo(self.candidate, staged, *outputs, heed=False)
        timed.tampered += echo.tampered

    def candidate_first(
        self, case: Case, stages: list[Staged], plans: list[list[int]], *, tare: bool
    ) -> tuple[list[Round], list[Round], float | None]:
        """The candidate's rounds before the reference's. Its checked outputs are read,
        before the stop stamp, where its own report puts them, but only inside the room
        the judge gave (the report is checked against the room as the reference's is, so
        it sizes nothing beyond it); once the reference has run, every call's report must
        equal the reference's, or it is a wrong answer. Where the reference's outputs
        proved larger than the rooms, the pair is void (`VoidPair`): nothing the
        candidate has seen is timed again. Its echo round echoes
        the reference's outputs of the pair before, where every judge has them in the
        same rooms. The tare's seconds come third (`reference_rounds`)."""
        rooms = [self.rooms_for(case, staged) for staged in stages]
        known = self.last_outputs.get(case.name)
        echoes = tare and not self.anyone(known is None or known[0] != rooms[-1])
        with self.turns.candidate_side():
            cands = [
                self.round(self.candidate, staged, room, plan, provisional=True)
                for staged, room, plan in zip(stages, rooms, plans, strict=True)
            ]
            if echoes and known is not None:
                self.echo_last(stages[-1], known, cands[-1])
        refs, harness_s = self.reference_rounds(case, stages, plans, [], tare=tare)
        moved = any(r.rooms != room for r, room in zip(refs, rooms, strict=True))
        if self.anyone(moved):
            # The reference's outputs outgrew the rooms the candidate answered in. Its
            # rounds are never run again on inputs it has seen (it could answer from what
            # it kept): the pair is void, and the parent draws another on fresh seeds.
            raise VoidPair
        # A candidate that said its room was short returned more than the reference did
        # (the rooms hold twice the reference's largest output): a wrong answer below.
        for cand, ref in zip(cands, refs, strict=True):
            for call, entry in cand.entries.items():
                why = replies.mismatch(entry, ref.outputs[call])
                if why:
                    cand.mismatches[call] = why
                    cand.copies.pop(call, None)
        return refs, cands, harness_s

    def calls_for(self, warm: Staged, ref: Round, asked: int) -> int:
        """Timed calls per round: what the parent asked, fewer when the reference's warm-up
        says a round would last over ROUND_TARGET_S or its inputs exceed ROUND_BYTES, never
        fewer than MIN_CALLS. A round's fixed cost (messages, copies) is spread over its
        calls; long or large calls need fewer to drown it. The judges agree on the least."""
        per_call_s = ref.seconds / max(1, len(warm.layouts))
        per_call_bytes = max(1, warm.end // max(1, len(warm.layouts)))
        calls = min(
            asked, int(ROUND_TARGET_S / max(per_call_s, 1e-9)), ROUND_BYTES // per_call_bytes
        )
        return self.agree(max(min(MIN_CALLS, asked), calls), torch.distributed.ReduceOp.MIN)

    def anyone(self, mine: bool) -> bool:
        """Whether any judge says yes. A round run again on one rank only would have its
        runner call its collectives alone, a hang: the reference's outputs may outgrow
        their rooms on one rank (outputs of rank-dependent sizes), and a candidate may
        claim so on one rank. Every judge runs such a round again, or none."""
        return bool(self.agree(int(mine), torch.distributed.ReduceOp.MAX))

    def agree(self, mine: int, op: Any) -> int:
        """Every judge's `mine` reduced by `op`: what all judges then act on alike."""
        value = torch.tensor([mine], device=self.device)
        torch.distributed.all_reduce(value, op=op)
        return int(value.item())

    def stage(self, case: Case, seeds: list[int]) -> Staged:
        assert self.problem is not None
        rank, world_size = self.setup.rank, self.setup.world_size
        return stage(self.problem, case, seeds, rank, world_size, self.device)

    def reference_round(self, case: Case, staged: Staged, checked: list[int]) -> Round:
        """The reference's round; its outputs' rooms are sized from what it returned before
        (or twice its inputs), and grown and the round run again on every rank when they
        were short on any (`anyone`)."""
        rooms = self.rooms_for(case, staged)
        for _ in range(MAX_ROOM_RETRIES):
            try:
                done = self.round(self.reference, staged, rooms, checked)
            except (RunnerFailed, RunnerGone) as exc:
                raise RuntimeError(f"the reference's runner failed: {exc}") from None
            need = max(out.need for out in done.outputs)
            if self.anyone(bool(need)):
                rooms = rooms_after(staged, 2 * need) if need else rooms
                continue
            largest = max((span(out.slots) for out in done.outputs), default=0)
            self.largest_output[case.name] = max(self.largest_output.get(case.name, 0), largest)
            return done
        raise RuntimeError("the reference's outputs outgrew every room the judge gave them")

    def rooms_for(self, case: Case, staged: Staged) -> list[tuple[int, int]]:
        """Each call's room for its outputs, after the staged inputs: twice the largest
        output of the case so far, or twice the call's inputs, at least MIN_ROOM_BYTES."""
        room = max(MIN_ROOM_BYTES, 2 * self.largest_output.get(case.name, 0))
        return rooms_after(staged, max([room, *(2 * input_bytes(x) for x in staged.layouts)]))

    def tare(self, staged: Staged, ref: Round) -> float:
        """The harness alone, timed: the reference's runner's echo of its round."""
        try:
            return self.echo(self.reference, staged, ref.rooms, ref.outputs).seconds
        except (RunnerFailed, RunnerGone) as exc:
            raise RuntimeError(f"the reference's runner failed: {exc}") from None

    def echo(
        self,
        link: RunnerLink,
        staged: Staged,
        rooms: list[tuple[int, int]],
        outputs: list[Output],
        *,
        heed: bool = True,
    ) -> Round:
        """`link`'s runner's round again on the same inputs, each call returning the
        reference's outputs (at their slots of `rooms`, already in its arena) instead of
        computing, into rooms past those: the harness alone, with the same copies and
        messages as a round, in an arena of the same size on both sides. Without `heed`
        (the candidate's) its reports are read as a provisional round's are and never acted on."""
        shift = max(offset + room for offset, room in rooms) - staged.end
        moved = [(offset + shift, room) for offset, room in rooms]
        echoes = [[out.kind, [s.to_json() for s in out.slots]] for out in outputs]
        return self.round(link, staged, moved, [], echoes=echoes, provisional=not heed)

    def round(
        self,
        link: RunnerLink,
        staged: Staged,
        rooms: list[tuple[int, int]],
        checked: list[int],
        *,
        expected: Round | None = None,
        echoes: list[Any] | None = None,
        provisional: bool = False,
    ) -> Round:
        """One round of `link`'s runner on the staged inputs, between the judge's stamps.

        The reference's round (`expected` None) says what each call returned; the
        candidate's must say the same of each call, and its checked calls' rooms are read
        at the reference's slots. A `provisional` round (the candidate's, before the
        reference's) is read at the slots of its own reports, bounded by the rooms, and
        held against the reference later (`candidate_first`)."""
        start = min((offset for offset, _ in rooms), default=staged.end)
        out_end = max((offset + room for offset, room in rooms), default=staged.end)
        base = link.ensure(out_end)
        base[start:out_end].fill_(0xFF)  # an output a runner never writes fails
        calls: list[dict[str, Any]] = [
            {"inputs": layout, "room": list(room)}
            for layout, room in zip(staged.layouts, rooms, strict=True)
        ]
        for call, echo in zip(calls, echoes or [], strict=False):
            call["echo"] = echo
        ok(link.command("prepare", {"calls": calls}))
        spin_s = SPIN_S if link.cuda else 0.0
        done = Round(rooms=list(rooms))
        read = done.provisional if provisional else done.read
        self.clock.barrier()
        self.clock.start()
        try:
            for k in range(len(rooms)):
                self.hand_over(link, base, staged, k)
                entry = ok(link.call_report(k, spin_s))["entry"]
                read(base, k, entry, rooms[k], expected, k in checked)
            answer = ok(link.receive(spin_s))
            done.seconds = self.clock.stop()
            done.tampered = replies.tampered(answer)
        except ReplyError as exc:
            raise RunnerGone(f"replied with {exc}", protocol=True) from None
        if expected is None and echoes is None and not provisional:
            done.outputs = [done.outputs_by_call[i] for i in range(len(rooms))]
        return done

    def hand_over(self, link: RunnerLink, base: torch.Tensor, staged: Staged, call: int) -> None:
        """Call `call`'s inputs into the arena, then the runner's word to make it: only now,
        with every earlier call's outputs copied out (`Round.read`), so that no call sees
        a later call's inputs and no answer can wait for them (docs/security.md)."""
        begin, end = staged.inputs_of(call)
        base[begin:end].copy_(staged.staging[begin:end])
        link.inputs_written()
        if call:
            link.ring(call)
        else:
            link.send("go", None)
