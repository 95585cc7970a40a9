"""Where a per-call handover's time goes on one GPU: a judge process and a runner process,
each pinned to its own core, a shared CUDA buffer (torch IPC), a pipe. Prints us per call.

Variants (J: judge, R: runner), per call:
  full        J copy input+sync, ring; R copy out, device sync, reply; J clone out
  no-J-gpu    J ring only; R copy, device sync, reply
  no-R-gpu    J copy+sync, ring; R reply only
  pipe        J ring; R reply (no GPU at all)
  R-stream    as full, R syncs its stream only
  J-nosync    as full, J does not sync before ring (R's stream waits nothing: races, timing only)
  one-proc    one process does J's and R's GPU work in turn (no pipe)
  full-yield  as full, both processes' CUDA waits blocking (cudaDeviceScheduleBlockingSync)
"""

import ctypes
import os
import statistics
import sys
import time

import torch
import torch.multiprocessing as mp

N = 1 << 15  # 64 KiB of bf16
CALLS = 400
WARM = 50


def spin(conn):
    while not conn.poll(0):
        pass


def set_flags(flag):
    if flag:
        # cudaDeviceScheduleBlockingSync = 4, through the driver's primary context flags
        cu = ctypes.CDLL("libcuda.so.1")
        cu.cuInit(0)
        dev = ctypes.c_int()
        cu.cuDeviceGet(ctypes.byref(dev), 0)
        print("ctxflags", cu.cuDevicePrimaryCtxSetFlags(dev, 4), file=sys.stderr)


def runner(conn, buf, core, variant):
    os.sched_setaffinity(0, {core})
    set_flags(variant == "full-yield")
    torch.cuda.set_device(0)
    src, room = buf[:N], buf[N : 2 * N]
    torch.zeros(4, device="cuda").copy_(torch.ones(4, device="cuda"))
    conn.send_bytes(b"ready")
    gpu = variant not in ("no-R-gpu", "pipe")
    while True:
        spin(conn)
        msg = conn.recv_bytes()
        if msg == b"stop":
            return
        if gpu:
            out = src * 2
            room.copy_(out)
            if variant == "R-stream":
                torch.cuda.current_stream().synchronize()
            else:
                torch.cuda.synchronize()
        conn.send_bytes(b'{"step": 1, "call": 0, "entry": {"kind": "tensor"}}')


def judge(variant, core_j, core_r):
    os.sched_setaffinity(0, {core_j})
    set_flags(variant == "full-yield")
    torch.cuda.set_device(0)
    buf = torch.zeros(2 * N, dtype=torch.bfloat16, device="cuda")
    staging = torch.randn(N, dtype=torch.bfloat16, device="cuda")
    a, b = mp.Pipe()
    p = mp.get_context("spawn").Process(target=runner, args=(b, buf, core_r, variant))
    p.start()
    a.recv_bytes()
    jgpu = variant not in ("no-J-gpu", "pipe")
    times = []
    for _i in range(WARM + CALLS):
        t0 = time.perf_counter()
        if jgpu:
            buf[:N].copy_(staging)
            if variant != "J-nosync":
                torch.cuda.current_stream().synchronize()
        a.send_bytes(b"1")
        spin(a)
        a.recv_bytes()
        if jgpu:
            buf[N:].clone()
        times.append(time.perf_counter() - t0)
    torch.cuda.synchronize()
    a.send_bytes(b"stop")
    p.join()
    return times[WARM:]


def one_proc():
    torch.cuda.set_device(0)
    buf = torch.zeros(2 * N, dtype=torch.bfloat16, device="cuda")
    staging = torch.randn(N, dtype=torch.bfloat16, device="cuda")
    src, room = buf[:N], buf[N:]
    times = []
    for _i in range(WARM + CALLS):
        t0 = time.perf_counter()
        buf[:N].copy_(staging)
        torch.cuda.current_stream().synchronize()
        room.copy_(src * 2)
        torch.cuda.synchronize()
        room.clone()
        times.append(time.perf_counter() - t0)
    return times[WARM:]


def main():
    cores = sorted(os.sched_getaffinity(0))
    cj, cr = cores[2], cores[4]
    variants = sys.argv[1:] or [
        "full",
        "no-J-gpu",
        "no-R-gpu",
        "pipe",
        "R-stream",
        "J-nosync",
        "one-proc",
        "full-yield",
    ]
    for rep in range(2):
        for v in variants:
            if v == "one-proc":
                ctx = mp.get_context("spawn")
                q = ctx.Queue()
                # a fresh process, so its flags match
                t = ctx.Process(target=_one, args=(q, cj))
                t.start()
                times = q.get()
                t.join()
            else:
                ctx = mp.get_context("spawn")
                q = ctx.Queue()
                t = ctx.Process(target=_judge, args=(q, v, cj, cr))
                t.start()
                times = q.get()
                t.join()
            us = sorted(x * 1e6 for x in times)
            print(
                f"{v:12s} rep {rep}: median {statistics.median(us):7.1f} us  "
                f"p10 {us[len(us) // 10]:7.1f}  p90 {us[9 * len(us) // 10]:7.1f}",
                flush=True,
            )


def _one(q, core):
    os.sched_setaffinity(0, {core})
    q.put(one_proc())


def _judge(q, v, cj, cr):
    q.put(judge(v, cj, cr))


if __name__ == "__main__":
    main()
