"""The floor's independent measurement (`evaluator.tools.floor`): back-to-back calls
between two CUDA events, in processes of the floor's own, one per rank, pinned where the
evaluator runs the rank's runners.

Two ways to take them:
  - `events_lines`: every line (solution, size) in processes started for the one take,
    as nccl-tests times a collective: bursts with a pause before each, the median;
  - `EventsBeside`: processes alive through one evaluator pass, taking one burst of a line
    after each of the evaluator's pairs of that line (`evaluate_bundle`'s
    `between_pairs`): each pair is then held against calls timed in the same seconds.
    Takes minutes apart read 26 to 52 us for one launch-bound line on one H100
    (2026-11-26): the host's speed, not the harness, decided a line held against them.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from queue import Empty
from typing import Any

import torch
import torch.distributed as dist

from evaluator.rank_process import cores_for
from problems.collective import all_reduce
from problems.spec import Case, InputContext

SOLUTIONS = ("all-reduce reference", "empty (copy)")
GPU_SIZES: tuple[int, ...] = (1 << 16, 1 << 20, 1 << 24)
CPU_SIZES: tuple[int, ...] = (1 << 10, 1 << 14)
WARMUP = 10
# Between two bursts of the events lines: about the time the other side's rounds take.
BURST_GAP_S = 0.02
Line = tuple[str, int]  # (solution, elements)


def sizes_of(args: argparse.Namespace, *, cpu: bool) -> tuple[int, ...]:
    """The cases' elements: `--sizes` where given (one case alone, when a study needs many
    runs of it), else the table's for the backend."""
    asked = tuple(int(n) for n in args.sizes.split(",") if n.strip())
    return asked or (CPU_SIZES if cpu else GPU_SIZES)


def events_lines(world: int, args: argparse.Namespace) -> list[dict[str, Any]]:
    """The events and fresh lines, from one process per rank (started here)."""
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    with tempfile.TemporaryDirectory(prefix="pkb-floor-") as folder:
        store = f"{folder}/rendezvous"
        procs = [
            ctx.Process(target=_take_rank, args=(r, world, args, store, queue))
            for r in range(world)
        ]
        for proc in procs:
            proc.start()
        lines = _from_rank_zero(queue, procs)
        for proc in procs:
            proc.join()
    return lines


class EventsBeside:
    """One process per rank for an evaluator pass: `burst(line)` times one burst of the
    line on every rank (the slowest rank's per-call time). Its rendezvous is a file of its
    own, as every group's here: a port, even one free when picked, can be taken by any
    process's outgoing connection before the ranks bind it."""

    def __init__(self, world: int, args: argparse.Namespace) -> None:
        ctx = mp.get_context("spawn")
        self.results = ctx.Queue()
        self.orders = [ctx.Queue() for _ in range(world)]
        self.folder = tempfile.TemporaryDirectory(prefix="pkb-floor-")
        store = f"{self.folder.name}/rendezvous"
        self.procs = [
            ctx.Process(
                target=_beside_rank, args=(r, world, args, store, self.orders[r], self.results)
            )
            for r in range(world)
        ]
        for proc in self.procs:
            proc.start()
        _from_rank_zero(self.results, self.procs)  # every rank ready

    def burst(self, line: Line) -> float:
        for orders in self.orders:
            orders.put(line)
        return float(_from_rank_zero(self.results, self.procs))

    def close(self) -> None:
        for orders in self.orders:
            orders.put(None)
        for proc in self.procs:
            proc.join(timeout=30)
            if proc.is_alive():
                proc.kill()
        self.folder.cleanup()


def _from_rank_zero(queue: Any, procs: list[Any]) -> Any:
    while True:
        try:
            return queue.get(timeout=5)
        except Empty:
            if any(proc.exitcode for proc in procs):
                for proc in procs:
                    proc.kill()
                raise SystemExit("a rank failed") from None


def _take_rank(rank: int, world: int, args: argparse.Namespace, store: str, queue: Any) -> None:
    device, lines = _rank_lines(rank, world, args, store)
    taken = []
    for (name, n), (fn, make) in lines.items():
        events = _events_over(fn, [make(0)], args, device)
        fresh = _events_over(fn, [make(1 + i) for i in range(10)], args, device)
        taken.append(
            {
                "solution": name,
                "n": n,
                "events_us": _slowest([events], device)[0],
                "fresh_us": _slowest([fresh], device)[0],
            }
        )
    if rank == 0:
        queue.put(taken)
    dist.destroy_process_group()


def _beside_rank(
    rank: int, world: int, args: argparse.Namespace, store: str, orders: Any, results: Any
) -> None:
    device, lines = _rank_lines(rank, world, args, store)
    inputs = {line: [make(0)] for line, (_, make) in lines.items()}
    if rank == 0:
        results.put("ready")
    while (line := orders.get()) is not None:
        took = _burst(lines[line][0], inputs[line], args.iters, device)
        took = _slowest([took], device)[0]
        if rank == 0:
            results.put(took)
    dist.destroy_process_group()


def _rank_lines(
    rank: int, world: int, args: argparse.Namespace, store: str
) -> tuple[torch.device, dict[Line, tuple[Callable[..., Any], Callable[[int], dict]]]]:
    """This rank's device, in a process group of the floor's own, and every line's
    solution with a maker of its inputs from a seed."""
    rendezvous = f"file://{store}"
    if args.cpu:
        device, dtype = torch.device("cpu"), "float32"
        dist.init_process_group("gloo", init_method=rendezvous, rank=rank, world_size=world)
    else:
        device, dtype = torch.device("cuda", rank), "bfloat16"
        # Where the evaluator runs this rank's runners (unpinned, the same calls read up
        # to 1.4x slower on one H100: evaluator.tools.pinning).
        cores = cores_for("reference", rank, world, "nccl")
        if cores:
            os.sched_setaffinity(0, set(cores))
        torch.cuda.set_device(device)
        dist.init_process_group(
            "nccl", init_method=rendezvous, rank=rank, world_size=world, device_id=device
        )
    lines: dict[Line, tuple[Callable[..., Any], Callable[[int], dict]]] = {}
    for n in sizes_of(args, cpu=args.cpu):
        case = Case(f"n={n}", dtype, {"n": n})
        out = torch.empty(n, dtype=case_dtype(dtype), device=device)

        def copier(x: torch.Tensor, out: torch.Tensor = out) -> torch.Tensor:
            out.copy_(x)
            return out

        def make(seed: int, case: Case = case) -> dict[str, Any]:
            ctx = InputContext(
                rank=rank, world_size=world, dtype=case.dtype, device=device, seed=seed
            )
            return all_reduce.make_inputs(case, ctx)

        for name, fn in zip(SOLUTIONS, (all_reduce.solution, copier), strict=True):
            lines[(name, n)] = (fn, make)
    return device, lines


def case_dtype(name: str) -> torch.dtype:
    return {"float32": torch.float32, "bfloat16": torch.bfloat16}[name]


def _events_over(
    fn: Callable[..., Any], inputs: list[dict], args: argparse.Namespace, device: Any
) -> float:
    """The median over `--bursts` bursts of `--iters` back-to-back calls each, a pause
    before each. The evaluator's rounds are bursts too (a warm-up round, then the timed
    calls, after the other side's rounds), and its median over rounds spread over seconds
    samples the host's speed phases; a single take of back-to-back calls, a few ms long,
    caught a fast or a slow moment (2026-11-26: takes of one line minutes apart read 25
    and 49 us on one H200, docs/measurements/2026-11-26-pairs-to-settle.md)."""
    times = []
    for _ in range(max(1, args.bursts)):
        time.sleep(BURST_GAP_S)
        times.append(_burst(fn, inputs, args.iters, device))
    return statistics.median(times)


def _burst(fn: Callable[..., Any], inputs: list[dict], iters: int, device: Any) -> float:
    """Back-to-back calls between two events, taking the inputs in turn, after WARMUP."""
    for i in range(WARMUP):
        fn(**inputs[i % len(inputs)])
    if device.type != "cuda":
        dist.barrier()
        began = time.perf_counter()
        for i in range(iters):
            fn(**inputs[i % len(inputs)])
        return (time.perf_counter() - began) * 1e6 / iters
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize(device)
    dist.barrier()
    start.record()
    for i in range(iters):
        fn(**inputs[i % len(inputs)])
    end.record()
    end.synchronize()
    return start.elapsed_time(end) * 1000.0 / iters


def _slowest(times: list[float], device: Any) -> list[float]:
    column = torch.tensor(times, dtype=torch.float64, device=device)
    dist.all_reduce(column, op=dist.ReduceOp.MAX)
    return column.tolist()
