"""Pipeline schedules: each rank's order of actions, and a runner that executes them.

Not a problem module (it defines no PROBLEM); the registry skips it.

An action is ("F", stage, micro-batch) for a forward, ("B", stage, micro-batch) for a
backward (only the input gradient where the schedule also has "W" actions), or
("W", stage, micro-batch) for the weight gradient of a split backward. A forward of stage s
sends its output to the forward of stage s+1; a backward of stage s sends its input
gradient to the backward of stage s-1.

`ticks` replays every rank's order in lockstep, one action per rank per tick, each action as
early as its inputs allow; every rank computes the same table. `run` then executes this
rank's column: after each tick's action, the tick's messages travel in one batched
isend/irecv that pairs every send with its receive in the same tick, so the exchange cannot
deadlock and needs no tags.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from typing import NamedTuple

import torch
import torch.distributed as dist


class Action(NamedTuple):
    kind: str  # "F", "B" or "W"
    stage: int
    mb: int


def one_f_one_b(rank: int, world_size: int, micro_batches: int) -> list[Action]:
    """1F1B (PipeDream-flush): min(W-1-r, M) forwards, then forward/backward pairs, then
    the remaining backwards; every phase takes micro-batches in increasing order."""
    warmup = min(world_size - 1 - rank, micro_batches)
    order = [Action("F", rank, m) for m in range(warmup)]
    for m in range(micro_batches - warmup):
        order += [Action("F", rank, warmup + m), Action("B", rank, m)]
    order += [Action("B", rank, m) for m in range(micro_batches - warmup, micro_batches)]
    return order


def interleaved(rank: int, world_size: int, chunks: int, micro_batches: int) -> list[Action]:
    """Megatron-LM's interleaved 1F1B; chunk c of rank r is stage c·W + r.

    Virtual step k (of M·V) works on micro-batch (k // (W·V))·W + k % W of chunk
    (k // W) % V going forward, and of chunk V-1 - (k // W) % V going backward. Warm-up
    runs all M·V forwards when M == W, else min(2·(W-1-r) + (V-1)·W, M·V) of them;
    then forward k+warmup and backward k alternate; then the remaining backwards.
    """
    w, v, total = world_size, chunks, chunks * micro_batches

    def step(kind: str, k: int) -> Action:
        chunk = (k // w) % v
        if kind == "B":
            chunk = v - 1 - chunk
        return Action(kind, chunk * w + rank, (k // (w * v)) * w + k % w)

    warmup = total if micro_batches == w else min(2 * (w - 1 - rank) + (v - 1) * w, total)
    order = [step("F", k) for k in range(warmup)]
    for k in range(total - warmup):
        order += [step("F", warmup + k), step("B", k)]
    return order + [step("B", k) for k in range(total - warmup, total)]


def zero_bubble_v(rank: int, world_size: int, micro_batches: int) -> list[Action]:
    """ZB-V (Qi et al., 2024): stages r and 2W-1-r on rank r, backward split into B and W.

    Built for N = max(M, 2W-1) micro-batches, then the actions of micro-batches >= M are
    dropped (that never breaks a dependency: they only involve each other). Each stage's
    F, B and W take micro-batches in increasing order; "F0" is the next forward of stage
    r, "F1" of stage 2W-1-r, likewise "B0"/"B1"; "W" is the oldest pending weight gradient
    unless named.
      warm-up:   F0 × (2(W-r) - 1); (F1, F0) × r; (F1, B1, W) × (W-r)
      steady:    until both stages have run N forwards: F0 (while fewer than N), B0, W,
                 F1, B1, W
      cool-down: (B0, B1) × r; (B0, W of stage r) × (W-r); then the pending W of stage
                 2W-1-r, then those of stage r.
    """
    n = max(micro_batches, 2 * world_size - 1)
    s0, s1 = rank, 2 * world_size - 1 - rank
    count = {(kind, s): 0 for kind in "FB" for s in (s0, s1)}
    pending: deque[tuple[int, int]] = deque()
    order: list[Action] = []

    def add(*kinds: str) -> None:
        for kind in kinds:
            if kind == "W":  # the oldest pending weight gradient
                order.append(Action("W", *pending.popleft()))
                continue
            stage = s0 if kind[1] == "0" else s1
            mb = count[(kind[0], stage)]
            count[(kind[0], stage)] += 1
            order.append(Action(kind[0], stage, mb))
            if kind[0] == "B":
                pending.append((stage, mb))

    def weight_of(stage: int) -> None:
        oldest = next(p for p in pending if p[0] == stage)
        pending.remove(oldest)
        order.append(Action("W", *oldest))

    add(*["F0"] * (2 * (world_size - rank) - 1))
    add(*["F1", "F0"] * rank)
    add(*["F1", "B1", "W"] * (world_size - rank))
    while count[("F", s1)] < n or count[("F", s0)] < n:
        if count[("F", s0)] < n:
            add("F0")
        add("B0", "W", "F1", "B1", "W")
    add(*["B0", "B1"] * rank)
    for _ in range(world_size - rank):
        add("B0")
        weight_of(s0)
    for stage in (s1, s0):
        while any(p[0] == stage for p in pending):
            weight_of(stage)
    return [a for a in order if a.mb < micro_batches]


def _needs(action: Action, num_stages: int) -> list[tuple[str, int, int]]:
    """The actions whose results `action` uses."""
    kind, stage, mb = action
    if kind == "F":
        return [("F", stage - 1, mb)] if stage > 0 else []
    if kind == "B":
        later = [("B", stage + 1, mb)] if stage < num_stages - 1 else []
        return [("F", stage, mb), *later]
    return [("B", stage, mb)]


def _receiver(action: Action, num_stages: int) -> int | None:
    """The stage whose action takes `action`'s output, or None at the model's ends."""
    if action.kind == "F" and action.stage < num_stages - 1:
        return action.stage + 1
    if action.kind == "B" and action.stage > 0:
        return action.stage - 1
    return None


def ticks(orders: Sequence[Sequence[Action]], placement: Sequence[int]) -> list[dict[int, Action]]:
    """Lockstep replay: tick t runs, on every rank, its next action if everything it needs
    finished at an earlier tick. `placement[s]` is the rank of stage s."""
    num_stages = len(placement)
    finished: dict[tuple[str, int, int], int] = {}
    position = [0] * len(orders)
    table: list[dict[int, Action]] = []
    while any(p < len(o) for p, o in zip(position, orders, strict=True)):
        now = len(table)
        tick = {
            rank: order[position[rank]]
            for rank, order in enumerate(orders)
            if position[rank] < len(order)
            and all(finished.get(n, now) < now for n in _needs(order[position[rank]], num_stages))
        }
        if not tick:
            raise ValueError("the ranks' orders wait on each other")
        for rank, action in tick.items():
            finished[tuple(action)] = now
            position[rank] += 1
        table.append(tick)
    return table


Step = Callable[[str, int, int, torch.Tensor | None], torch.Tensor | None]


def run(
    table: list[dict[int, Action]],
    placement: Sequence[int],
    step: Step,
    new_buffer: Callable[[], torch.Tensor],
) -> None:
    """Execute this rank's actions tick by tick: `step(kind, stage, mb, incoming)` returns
    the tensor for the receiving stage (or None); messages between ranks are batched per
    tick, and a hand-over to a stage of the same rank stays local."""
    rank, num_stages = dist.get_rank(), len(placement)
    inbox: dict[tuple[str, int, int], torch.Tensor] = {}
    for tick in table:
        ops = []
        action = tick.get(rank)
        if action is not None:
            incoming = inbox.pop(tuple(action), None)
            out = step(action.kind, action.stage, action.mb, incoming)
            receiver = _receiver(action, num_stages)
            if receiver is not None and placement[receiver] == rank:
                inbox[(action.kind, receiver, action.mb)] = out
            elif receiver is not None:
                ops.append(dist.P2POp(dist.isend, out, placement[receiver]))
        for peer, other in tick.items():
            receiver = _receiver(other, num_stages)
            if peer != rank and receiver is not None and placement[receiver] == rank:
                buffer = new_buffer()
                inbox[(other.kind, receiver, other.mb)] = buffer
                ops.append(dist.P2POp(dist.irecv, buffer, peer))
        if ops:
            for request in dist.batch_isend_irecv(ops):
                request.wait()


def busiest_sender(placement: Sequence[int], world_size: int) -> int:
    """Messages per micro-batch sent by the rank that sends the most: one activation for
    each stage whose successor lives elsewhere, one gradient for each stage whose
    predecessor does."""
    sent = [0] * world_size
    for stage, rank in enumerate(placement):
        if stage + 1 < len(placement) and placement[stage + 1] != rank:
            sent[rank] += 1
        if stage > 0 and placement[stage - 1] != rank:
            sent[rank] += 1
    return max(sent)
