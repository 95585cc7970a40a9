"""Where a runner's threads run, and what it costs a launch-bound call (numbers to read).

    python -m evaluator.tools.pinning --out DIR [--reps 6] [--iters 200]

One process per placement below, each its own one-rank process group (NCCL on a GPU host),
all alive at once and measured in turn, the order shuffled each repetition, so that every
placement meets the host's same speed phases. Each measures back-to-back calls between two
CUDA events, as `evaluator.tools.floor`'s "events" lines do: the all-reduce reference (a
clone and NCCL's all-reduce) and a copy into a kept buffer (no NCCL), at 64K and 1M bf16.

Placements (A and B: two physical cores the evaluator's ranks could get):
  unpinned        the process's threads anywhere
  one core        every thread on A (how runners were pinned: NCCL's and CUDA's threads
                  share the caller's core)
  two cores       every thread on A or B
  main on A       every thread on A or B, then the calling thread alone on A, after the
                  process group and its first collective started the helper threads
  one core, seccomp   as "one core", under the sandbox's seccomp filter (whatever the
                  kernel's speculation mitigations do to a filtered process)
Writes pinning.json and pinning.md.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing as mp
import os
import random
import statistics
import tempfile
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from evaluator.rank_process import NO_MULTICAST, physical_cores

PLACEMENTS = ("unpinned", "one core", "two cores", "main on A", "one core, seccomp")
SIZES = (1 << 16, 1 << 20)
WARMUP = 20


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m evaluator.tools.pinning", description=__doc__)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--reps", type=int, default=6)
    parser.add_argument("--iters", type=int, default=200)
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        raise SystemExit("the pinning probe needs a CUDA GPU")
    os.environ.update(NO_MULTICAST)
    cpus = sorted(os.sched_getaffinity(0))
    cores = physical_cores(cpus) or [[c] for c in cpus]
    if len(cores) < 4:
        raise SystemExit("the pinning probe needs four physical cores")
    a, b = cores[2][0], cores[3][0]
    report = probe(args, a, b)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "pinning.json").write_text(json.dumps(report, indent=2))
    (args.out / "pinning.md").write_text(markdown(report))
    print(markdown(report))
    return 0


def probe(args: argparse.Namespace, a: int, b: int) -> dict[str, Any]:
    ctx = mp.get_context("spawn")
    workers = {}
    with tempfile.TemporaryDirectory() as tmp:
        for i, name in enumerate(PLACEMENTS):
            parent, child = ctx.Pipe()
            proc = ctx.Process(target=_worker, args=(child, name, a, b, f"{tmp}/rdv{i}"))
            proc.start()
            workers[name] = (proc, parent)
        setup = {name: conn.recv() for name, (_, conn) in workers.items()}
        times: dict[str, dict[str, list[float]]] = {name: {} for name in PLACEMENTS}
        order = list(PLACEMENTS)
        for _ in range(args.reps):
            random.shuffle(order)
            for name in order:
                conn = workers[name][1]
                conn.send(args.iters)
                for key, us in conn.recv().items():
                    times[name].setdefault(key, []).append(us)
        for proc, conn in workers.values():
            conn.send(None)
            proc.join()
    return {
        "gpu": torch.cuda.get_device_name(0),
        "torch": torch.__version__,
        "cores": [a, b],
        "iters": args.iters,
        "reps": args.reps,
        "setup": setup,
        "times_us": times,
        "kernel": _vulnerabilities(),
    }


def _worker(conn: Any, name: str, a: int, b: int, rendezvous: str) -> None:
    if name in ("one core", "one core, seccomp"):
        os.sched_setaffinity(0, {a})
    elif name in ("two cores", "main on A"):
        os.sched_setaffinity(0, {a, b})
    filtered = False
    if name.endswith("seccomp"):
        from evaluator.host.bubblewrap import seccomp_filter

        with contextlib.suppress(ImportError):  # no pyseccomp: setup says so
            seccomp_filter()
            filtered = True
    device = torch.device("cuda", 0)
    torch.cuda.set_device(device)
    dist.init_process_group(
        "nccl", init_method=f"file://{rendezvous}", rank=0, world_size=1, device_id=device
    )
    calls = _calls(device)
    for fn, x in calls.values():
        for _ in range(WARMUP):
            fn(x)
    torch.cuda.synchronize()
    if name == "main on A":
        os.sched_setaffinity(0, {a})  # the calling thread only (Linux affinity is per thread)
    conn.send({"threads": _threads(), "speculation": _speculation(), "seccomp": filtered})
    while (iters := conn.recv()) is not None:
        conn.send({key: _events(fn, x, iters) for key, (fn, x) in calls.items()})
    dist.destroy_process_group()


def _calls(device: torch.device) -> dict[str, tuple[Any, torch.Tensor]]:
    from problems.collective import all_reduce

    calls = {}
    for n in SIZES:
        x = torch.randn(n, dtype=torch.bfloat16, device=device)
        out = torch.empty_like(x)
        calls[f"all-reduce {n}"] = (all_reduce.solution, x)
        calls[f"copy {n}"] = (lambda x, out=out: out.copy_(x), x)
    return calls


def _events(fn: Any, x: torch.Tensor, iters: int) -> float:
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    for _ in range(iters):
        fn(x)
    end.record()
    end.synchronize()
    return start.elapsed_time(end) * 1000.0 / iters


def _threads() -> list[str]:
    """Each thread's name and the CPUs it may run on."""
    found = []
    for task in sorted(Path("/proc/self/task").iterdir()):
        fields = dict(
            line.split(":\t", 1)
            for line in (task / "status").read_text().splitlines()
            if ":\t" in line
        )
        name, cpus = fields.get("Name", "?"), fields.get("Cpus_allowed_list", "?")
        found.append(f"{name.strip()}: {cpus.strip()}")
    return found


def _speculation() -> list[str]:
    status = Path("/proc/self/status").read_text().splitlines()
    return [line for line in status if line.startswith("Speculation")]


def _vulnerabilities() -> dict[str, str]:
    root = Path("/sys/devices/system/cpu/vulnerabilities")
    try:
        return {p.name: p.read_text().strip() for p in sorted(root.iterdir())}
    except OSError:
        return {}


def markdown(report: dict[str, Any]) -> str:
    keys = sorted({k for t in report["times_us"].values() for k in t})
    lines = [
        f"# Placement of a runner's threads ({report['gpu']}, torch {report['torch']})",
        "",
        f"Per call, us: the median over {report['reps']} repetitions (placements in shuffled "
        f"turns) of {report['iters']} back-to-back calls between two CUDA events. Cores "
        f"A, B = {report['cores']}.",
        "",
        "| placement | " + " | ".join(keys) + " |",
        "|---|" + "---|" * len(keys),
    ]
    for name, times in report["times_us"].items():
        cells = [f"{statistics.median(times[k]):.1f}" for k in keys]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    raise SystemExit(main())
