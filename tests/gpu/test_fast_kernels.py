"""examples/fast's kernels with W ranks emulated on one GPU (W = 2, 4, 8).

Symmetric memory refuses two ranks on one GPU, but the kernels only see tables of
addresses: here every "rank" gets an ordinary CUDA buffer and a zeroed int32 signal pad,
and its kernel runs on a stream of its own, so the ranks' kernels run side by side and
their in-kernel barriers meet. Each test makes several calls in a row (the halves of the
double buffer alternate, the pads must be back to zero after each) over awkward sizes,
and compares with torch on the same inputs.

    python3 -m pytest tests/gpu/test_fast_kernels.py -p no:django -p no:cacheprovider -q
"""

from __future__ import annotations

import importlib
import os
import sys
import time
from pathlib import Path

import pytest
import torch

HAS_CUDA = torch.cuda.is_available()
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA GPU")]

if HAS_CUDA:
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples" / "fast"))
    fast = importlib.import_module("_fast")

WORLDS = [2, 4, 8]
DTYPES = [torch.float32, torch.bfloat16]
PAD_SLOTS = 512  # 2 KiB, the smallest signal pad torch has shipped
DEADLINE_S = 30.0
# Sizes around the 4096-element block, not dividing by W, and past the two-shot switch.
SIZES = [1, 17, 1000, 4097, 3 * 4096 + 5, 300_007]


class Ranks:
    """W ranks on one GPU: the buffers, pads and tables a symmetric allocation would give."""

    def __init__(self, world: int, room: int, dtype: torch.dtype):
        self.world, self.room, self.calls = world, room, 0
        # NaN-filled: a kernel reading a slot nobody wrote shows up in the results.
        self.bufs = [torch.full((2 * room,), float("nan"), dtype=dtype, device="cuda")]
        self.bufs += [torch.full_like(self.bufs[0], float("nan")) for _ in range(world - 1)]
        self.pads = [torch.zeros(PAD_SLOTS, dtype=torch.int32, device="cuda") for _ in range(world)]
        self.buf_table = _table(self.bufs)
        self.pad_table = _table(self.pads)
        self.streams = [torch.cuda.Stream() for _ in range(world)]
        # Blocks of all W ranks must be resident at once on the one GPU.
        self.blocks = 32 // world

    def run(self, launch, xs: list[torch.Tensor], **kwargs) -> list:
        """`launch(xs[rank], team, blocks=..., **kwargs)` for every rank, each on its
        stream; their results."""
        base = (self.calls % 2) * self.room
        self.calls += 1
        torch.cuda.synchronize()
        outs = []
        for rank, stream in enumerate(self.streams):
            team = fast.Team(
                self.buf_table, self.pad_table, rank, self.world, self.bufs[rank], base, PAD_SLOTS
            )
            with torch.cuda.stream(stream):
                outs.append(launch(xs[rank], team, blocks=self.blocks, **kwargs))
        self._wait()
        busy = [r for r, pad in enumerate(self.pads) if pad.count_nonzero().item()]
        assert not busy, f"signal pads of ranks {busy} not back to zero"
        return outs

    def _wait(self) -> None:
        events = [stream.record_event() for stream in self.streams]
        deadline = time.monotonic() + DEADLINE_S
        while not all(event.query() for event in events):
            if time.monotonic() > deadline:
                # The spinning kernels never end: no later test could run on this GPU and
                # the process could not exit. End it, loudly, instead of hanging.
                print(f"\nDEADLOCK: kernels still spinning after {DEADLINE_S} s", flush=True)
                os._exit(3)
            time.sleep(0.001)
        torch.cuda.synchronize()


def _table(tensors: list[torch.Tensor]) -> torch.Tensor:
    return torch.tensor([t.data_ptr() for t in tensors], dtype=torch.int64, device="cuda")


def _inputs(world: int, n: int, dtype: torch.dtype, seed: int) -> list[torch.Tensor]:
    gen = torch.Generator(device="cuda").manual_seed(seed)
    return [torch.randn(n, generator=gen, device="cuda").to(dtype) for _ in range(world)]


def _sum(tensors, dtype):
    """The kernels' sum: float32, in rank order, one rounding at the end."""
    acc = tensors[0].float()
    for t in tensors[1:]:
        acc = acc + t.float()
    return acc.to(dtype)


def _staged_combine(x, team, **kwargs):
    staged = team.stage(x.numel())
    staged.copy_(x)  # as the GEMM's out= does in tp-gemm-allreduce
    return fast.combine(staged, team, **kwargs)


def _room(world: int, n: int) -> int:
    return world * n + 64 * world


def _same(actual: torch.Tensor, expected: torch.Tensor, what: str) -> None:
    assert actual.shape == expected.shape, (what, actual.shape, expected.shape)
    bad = (actual != expected).nonzero()
    assert not len(bad), f"{what}: {len(bad)} elements differ, first at {bad[0].tolist()}"


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("world", WORLDS)
def test_all_reduce_is_the_same_float32_rank_order_sum_on_every_rank(world, dtype):
    ranks = Ranks(world, _room(1, max(SIZES)), dtype)
    for call, n in enumerate([*SIZES, *reversed(SIZES)]):
        xs = _inputs(world, n, dtype, seed=call)
        for rank, out in enumerate(ranks.run(fast.combine, xs)):
            _same(out, _sum(xs, dtype), f"call {call} n={n} rank {rank}")


@pytest.mark.parametrize("world", WORLDS)
def test_all_reduce_of_staged_data_adds_the_bias_before_rounding(world):
    dtype, cols = torch.bfloat16, 96
    ranks = Ranks(world, _room(1, 4096 * cols), dtype)
    for call, rows in enumerate([1, 7, 4096, 5]):
        xs = _inputs(world, rows * cols, dtype, seed=call)
        bias = _inputs(1, cols, dtype, seed=100 + call)[0]

        expected = (_sum(xs, torch.float32) + bias.float().repeat(rows)).to(dtype)
        for rank, out in enumerate(ranks.run(_staged_combine, xs, bias=bias)):
            _same(out, expected, f"call {call} rows={rows} rank {rank}")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("world", WORLDS)
def test_reduce_and_broadcast_serve_their_root(world, dtype):
    ranks = Ranks(world, _room(1, max(SIZES)), dtype)
    for call, n in enumerate(SIZES):
        xs, root = _inputs(world, n, dtype, seed=call), call % world
        outs = ranks.run(fast.combine, xs, dst=root)
        _same(outs[root], _sum(xs, dtype), f"reduce call {call} n={n}")
        for rank, out in enumerate(ranks.run(fast.combine, xs, src=root)):
            _same(out, xs[root], f"broadcast call {call} n={n} rank {rank}")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("world", WORLDS)
def test_all_gather_and_gather_concatenate_in_rank_order(world, dtype):
    ranks = Ranks(world, _room(1, max(SIZES)), dtype)
    for call, n in enumerate(SIZES):
        xs, root = _inputs(world, n, dtype, seed=call), (call + 1) % world
        expected = torch.cat(xs)
        for rank, out in enumerate(ranks.run(fast.gather, xs)):
            _same(out, expected, f"all-gather call {call} n={n} rank {rank}")
        _same(ranks.run(fast.gather, xs, dst=root)[root], expected, f"gather call {call} n={n}")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("world", WORLDS)
def test_all_to_all_reduce_scatter_and_scatter_deliver_chunk_r_to_rank_r(world, dtype):
    chunks = [1, 500, 4097, 50_001]
    ranks = Ranks(world, _room(world, max(chunks)), dtype)
    for call, n in enumerate(chunks):
        xs, root = _inputs(world, world * n, dtype, seed=call), (call + 2) % world
        parts = [x.view(world, n) for x in xs]
        for rank, out in enumerate(ranks.run(fast.exchange, xs, reduce=False)):
            _same(out, torch.cat([p[rank] for p in parts]), f"all-to-all n={n} rank {rank}")
        for rank, out in enumerate(ranks.run(fast.exchange, xs, reduce=True)):
            _same(out, _sum([p[rank] for p in parts], dtype), f"reduce-scatter n={n} rank {rank}")
        for rank, out in enumerate(ranks.run(fast.scatter, xs, src=root)):
            _same(out, parts[root][rank], f"scatter n={n} rank {rank}")


def test_empty_inputs_launch_nothing_and_return_empty():
    ranks = Ranks(2, 1024, torch.float32)
    xs = _inputs(2, 0, torch.float32, seed=0)
    assert [out.numel() for out in ranks.run(fast.combine, xs)] == [0, 0]


@pytest.mark.parametrize("dtype", DTYPES)
def test_row_logsumexp_matches_torch(dtype):
    gen = torch.Generator(device="cuda").manual_seed(7)
    for rows, cols in [(1, 1), (3, 1000), (16, 2048), (5, 70_001)]:
        x = (4 * torch.randn(rows, cols, generator=gen, device="cuda")).to(dtype)
        expected = torch.logsumexp(x.float(), dim=1)
        torch.testing.assert_close(fast.row_logsumexp(x), expected, atol=1e-5, rtol=1e-5)
