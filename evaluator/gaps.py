"""How the work between two timed calls changes the next call's time (numbers to read).

    python -m evaluator.gaps [--iters 300] [--rounds 2]

One process per GPU times the all-reduce problem's reference (NCCL) through the harness's
own former loop (`timing.run_timed`), with different work between calls: none, a copy of
the output, a copy and its digest (what the harness's batches do between calls, see
`evaluator.floor` for the batches themselves), a blocking round trip per call, and idle
or busy waits. On
GPU hosts an idle gap makes the next call slower (2026-11-22, 2x H200: a 2 ms sleep added
about 80 us to a 1M-element all-reduce), which is why the reference and the candidate go
through the same loop. Rank 0 prints the median and spread of the slowest rank per call.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import statistics
import time
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any

import torch
import torch.distributed as dist

from evaluator.ranks import NO_MULTICAST
from evaluator.timing import copy_output, digest, run_timed
from problems.collective.all_reduce import solution as all_reduce

SIZES = (1 << 20, 1 << 24, 1 << 26)
WARMUP = 10


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m evaluator.gaps", description=__doc__)
    parser.add_argument("--iters", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args(argv)
    os.environ.update(NO_MULTICAST)
    world = torch.cuda.device_count()
    if world < 2:
        raise SystemExit("needs 2 or more CUDA GPUs")
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_rank, args=(r, world, args)) for r in range(world)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join()
    return max(proc.exitcode or 0 for proc in procs)


def _answerer(conn: Connection) -> None:
    """Answers a question per call, as the parent answered the former checked-call ones."""
    while True:
        question = json.loads(conn.recv_bytes())
        if question.get("stop"):
            return
        conn.send(("answer", question["step"], [question["call"], False]))


def _rank(rank: int, world: int, args: argparse.Namespace) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT="29557")
    torch.cuda.set_device(rank)
    device = torch.device("cuda", rank)
    dist.init_process_group("nccl", rank=rank, world_size=world, device_id=device)
    here, there = mp.get_context("fork").Pipe()
    helper = mp.get_context("fork").Process(target=_answerer, args=(there,))
    helper.start()
    lines = []
    for round_ in range(args.rounds):
        for n in SIZES:
            x = torch.randn(n, device=device, dtype=torch.bfloat16)
            for name, between in _variants(here).items():
                times = _time(x, args.iters, device, between)
                lines.append(f"round {round_ + 1}  all-reduce {n:>9d}  {name:20s} {times}")
    here.send_bytes(json.dumps({"stop": True}).encode())
    helper.join()
    if rank == 0:
        print("\n".join(lines), flush=True)
    dist.destroy_process_group()


Hook = Callable[[int, Any], None]


def _variants(conn: Connection) -> dict[str, Callable[[], tuple[Hook | None, Callable[[], Any]]]]:
    """Each makes a fresh (after_call, finish) pair for one timed loop."""

    def done() -> None:
        return None

    def round_trip(i: int, out: Any) -> None:
        conn.send_bytes(json.dumps({"step": 1, "call": i}).encode())
        conn.recv()

    def wait(seconds: float, *, busy: bool) -> Hook:
        def hook(i: int, out: Any) -> None:
            if not busy:
                time.sleep(seconds)
                return
            began = time.perf_counter()
            while time.perf_counter() - began < seconds:
                pass

        return hook

    return {
        "nothing": lambda: (None, done),
        "copy": lambda: (lambda i, out: copy_output(out), done),
        "copy and digest": lambda: (lambda i, out: digest(copy_output(out)), done),
        "blocking round trip": lambda: (round_trip, done),
        "busy 200 us": lambda: (wait(200e-6, busy=True), done),
        "sleep 200 us": lambda: (wait(200e-6, busy=False), done),
        "sleep 2 ms": lambda: (wait(2e-3, busy=False), done),
    }


def _time(
    x: torch.Tensor,
    iters: int,
    device: torch.device,
    make_hook: Callable[[], tuple[Hook | None, Callable[[], Any]]],
) -> str:
    hook, finish = make_hook()
    times = run_timed(
        all_reduce, lambda i: {"x": x}, calls=WARMUP + iters, device=device, after_call=hook
    )[WARMUP:]
    finish()  # collect the answers still due, so that none is left for the next loop
    slowest = torch.tensor(times, device=device)
    dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
    values = slowest.tolist()
    q1, _, q3 = statistics.quantiles(values, n=4)
    return f"median {statistics.median(values):8.1f} us  iqr {q3 - q1:6.1f}"


if __name__ == "__main__":
    raise SystemExit(main())
