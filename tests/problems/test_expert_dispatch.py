"""Expert-parallel dispatch and combine references over gloo ranks, against plain math.

The math sees every rank's inputs at once and builds what each rank must hold from a
one-hot routing matrix, walking experts, sources and tokens in the promised order; the
combines look each row up by (source, token, expert) and sum in float64; the FP8 codes come
from a nearest-value search over the e4m3 grid, built from its bit layout. None of it
shares code with the references, so a wrong reference fails here.
"""

from __future__ import annotations

import math
import random

import pytest
import torch

from problems import Case, InputContext, all_problems, get_problem
from problems.expert._routing_a import draw_topk, expected_peer_rows
from tests.problems.harness import (
    WORLD_SIZES,
    Expected,
    Inputs,
    check_against,
    rank_inputs,
    run_references,
)

# --- routing as one-hot matrices -------------------------------------------------------------


def _one_hot(ids: torch.Tensor, experts: int) -> torch.Tensor:
    """[T, E] bool: token t chose expert e."""
    hot = torch.zeros(len(ids), experts, dtype=torch.bool)
    for t, row in enumerate(ids.tolist()):
        for e in row:
            hot[t, e] = True
    return hot


def _arrivals(maps: list[torch.Tensor], rank: int, local: int) -> list[tuple[int, int, int]]:
    """(local expert, source, token) of every row rank `rank` receives, in promised order."""
    w = len(maps)
    return [
        (le, s, t)
        for le in range(local)
        for s in range(w)
        for t in maps[s][:, rank * local + le].nonzero().flatten().tolist()
    ]


def _dispatch(rows: list[torch.Tensor], maps: list[torch.Tensor], w: int, counts_dtype):
    """Per rank: the received rows (stacked from `rows[s][t]`) and the [L, W] counts."""
    local = maps[0].shape[1] // w
    hidden = rows[0].shape[1:]
    out = []
    for r in range(w):
        got = _arrivals(maps, r, local)
        picked = [rows[s][t] for _, s, t in got]
        recv = torch.stack(picked) if picked else rows[0].new_zeros((0, *hidden))
        counts = torch.zeros(local, w, dtype=counts_dtype)
        for le, s, _ in got:
            counts[le, s] += 1
        out.append((recv, counts))
    return out


def dispatch(inputs: Inputs, w: int):
    experts = inputs[0]["num_experts"]
    maps = [_one_hot(i["topk_ids"], experts) for i in inputs]
    return _dispatch([i["x"] for i in inputs], maps, w, torch.int64)


def permute_dispatch(inputs: Inputs, w: int):
    maps = [i["routing_map"] for i in inputs]
    rows = _dispatch([i["hidden"] for i in inputs], maps, w, torch.int64)
    local = maps[0].shape[1] // w
    out = []
    for r, (recv, counts) in enumerate(rows):
        got = _arrivals(maps, r, local)
        probs = torch.tensor(
            [inputs[s]["probs"][t, r * local + le].item() for le, s, t in got], dtype=torch.float32
        )
        out.append((recv, probs, counts.sum(dim=1)))
    return out


def _combine(inputs: Inputs, w: int, maps: list[torch.Tensor], weight) -> list[torch.Tensor]:
    """y[s][t] = sum over t's experts e of weight(s, t, e) * (e's row for (s, t)), float64."""
    local = maps[0].shape[1] // w
    row_of = {}  # (source, token, expert) -> (holding rank, row)
    for r in range(w):
        for i, (le, s, t) in enumerate(_arrivals(maps, r, local)):
            row_of[(s, t, r * local + le)] = (r, i)
    out = []
    for s in range(w):
        tokens, experts = maps[s].shape
        hidden = inputs[0]["expert_out"].shape[1]
        y = torch.zeros(tokens, hidden, dtype=torch.float64)
        for t in range(tokens):
            for e in maps[s][t].nonzero().flatten().tolist():
                r, i = row_of[(s, t, e)]
                y[t] += weight(s, t, e) * inputs[r]["expert_out"][i].double()
        out.append(y)
    return out


def combine(inputs: Inputs, w: int) -> list[torch.Tensor]:
    experts = inputs[0]["num_experts"]
    maps = [_one_hot(i["topk_ids"], experts) for i in inputs]

    def weight(s: int, t: int, e: int) -> float:
        slot = inputs[s]["topk_ids"][t].tolist().index(e)
        return inputs[s]["topk_weights"][t, slot].item()

    return _combine(inputs, w, maps, weight)


def unpermute_combine(inputs: Inputs, w: int) -> list[torch.Tensor]:
    maps = [i["routing_map"] for i in inputs]
    return _combine(inputs, w, maps, lambda s, t, e: inputs[s]["probs"][t, e].item())


def dispatch_fewer_experts(inputs: Inputs, w: int):
    experts = inputs[0]["num_experts"]
    out = []
    for r in range(w):
        group = range(r // experts * experts, (r // experts + 1) * experts)
        rows, counts = [], torch.zeros(w, dtype=torch.int64)
        for s in group:
            for t, chosen in enumerate(inputs[s]["topk_ids"].tolist()):
                if r % experts in chosen:
                    rows.append(inputs[s]["x"][t])
                    counts[s] += 1
        hidden = inputs[0]["x"].shape[1]
        out.append((torch.stack(rows) if rows else inputs[0]["x"].new_zeros(0, hidden), counts))
    return out


# --- FP8 e4m3 from its bit layout ------------------------------------------------------------


def _e4m3_grid() -> torch.Tensor:
    """Values of the non-negative finite codes 0..126, in code order (increasing)."""
    values = []
    for code in range(127):
        exponent, mantissa = code >> 3, code & 7
        if exponent == 0:
            values.append(mantissa / 8 * 2.0**-6)
        else:
            values.append((1 + mantissa / 8) * 2.0 ** (exponent - 7))
    return torch.tensor(values, dtype=torch.float64)


def _e4m3_code(v: float, grid: torch.Tensor) -> int:
    """Round to nearest e4m3 (ties to the even code), saturating at 448; sign kept."""
    sign = 0x80 if math.copysign(1.0, v) < 0 else 0
    a = min(abs(v), 448.0)
    hi = int(torch.searchsorted(grid, torch.tensor(a, dtype=torch.float64)).item())
    if hi < len(grid) and grid[hi].item() == a:
        return sign | hi
    lo = hi - 1
    below, above = a - grid[lo].item(), grid[hi].item() - a
    code = lo if below < above or (below == above and lo % 2 == 0) else hi
    return sign | code


def _quantize_rows(x: torch.Tensor, grid) -> tuple[torch.Tensor, torch.Tensor]:
    """[T, H] -> codes [T, H] uint8, scales [T, H/128] float32, element by element."""
    tokens, hidden = x.shape
    codes = torch.zeros(tokens, hidden, dtype=torch.uint8)
    scales = torch.zeros(tokens, hidden // 128, dtype=torch.float32)
    values = x.float().double()
    for t in range(tokens):
        for b in range(hidden // 128):
            block = values[t, b * 128 : (b + 1) * 128]
            amax = block.abs().max().item()
            # A float64 quotient of float32 operands rounds to the float32 quotient.
            scale = torch.tensor(amax / 448.0 if amax > 0 else 1.0).float().item()
            scales[t, b] = scale
            quotients = (block / scale).float().double().tolist()
            for c, q in enumerate(quotients):
                codes[t, b * 128 + c] = _e4m3_code(q, grid)
    return codes, scales


def low_latency_dispatch(inputs: Inputs, w: int):
    experts, max_tokens = inputs[0]["num_experts"], inputs[0]["max_tokens"]
    local, hidden = experts // w, inputs[0]["x"].shape[1]
    grid = _e4m3_grid()
    quantized = [_quantize_rows(i["x"], grid) for i in inputs]
    out = []
    for r in range(w):
        codes = torch.zeros(local, w * max_tokens, hidden, dtype=torch.uint8)
        scales = torch.zeros(local, w * max_tokens, hidden // 128, dtype=torch.float32)
        counts = torch.zeros(local, w, dtype=torch.int32)
        for s in range(w):
            for t, chosen in enumerate(inputs[s]["topk_ids"].tolist()):
                for e in chosen:
                    if e // local != r:
                        continue
                    slot = s * max_tokens + int(counts[e % local, s])
                    codes[e % local, slot] = quantized[s][0][t]
                    scales[e % local, slot] = quantized[s][1][t]
                    counts[e % local, s] += 1
        out.append((codes, scales, counts))
    return out


EXPECTED: dict[str, Expected] = {
    "ep-dispatch": dispatch,
    "ep-combine": combine,
    "ep-permute-dispatch": permute_dispatch,
    "ep-unpermute-combine": unpermute_combine,
    "ep-dispatch-fewer-experts": dispatch_fewer_experts,
    "ep-low-latency-dispatch": low_latency_dispatch,
}


@pytest.fixture(scope="module", params=WORLD_SIZES, ids=lambda w: f"world{w}")
def reference_outputs(request, tmp_path_factory):
    world_size = request.param
    return world_size, run_references(sorted(EXPECTED), world_size, tmp_path_factory.mktemp("rdv"))


def test_every_problem_here_is_in_the_catalog():
    expert = {p.slug for p in all_problems() if p.category == "expert"}
    assert set(EXPECTED) <= expert


@pytest.mark.parametrize("slug", sorted(EXPECTED))
def test_reference_matches_single_process_math(reference_outputs, slug):
    world_size, outputs = reference_outputs
    check_against(slug, world_size, outputs, EXPECTED[slug])


# --- the ragged facts the cases promise ------------------------------------------------------


@pytest.mark.parametrize("slug", ["ep-dispatch", "ep-combine", "ep-low-latency-dispatch"])
def test_skewed_cases_starve_an_expert_and_favour_another(slug):
    case = next(c for c in get_problem(slug).dev_cases if c.params.get("skew"))
    for w in (2, 4, 8):
        ids = torch.cat([rank_inputs(slug, case.name, r, w)["topk_ids"] for r in range(w)])
        load = torch.bincount(ids.flatten(), minlength=case.params["experts"])
        assert load[-1] == 0, "the cold expert gets no tokens"
        assert load[0] > 0.8 * len(ids), "the hot expert gets most tokens"


def test_empty_rank_sends_and_receives_as_promised(reference_outputs):
    world_size, outputs = reference_outputs
    # ep-dispatch: nobody receives anything from rank 1; ep-combine: rank 1 returns no rows.
    for recv, counts in outputs[("ep-dispatch", "dev-empty-rank")]:
        assert counts[:, 1].sum() == 0 and counts.sum() == len(recv)
    assert outputs[("ep-combine", "dev-empty-rank")][1].shape[0] == 0
    assert outputs[("ep-unpermute-combine", "dev-empty-rank")][1].shape[0] == 0
    # The skewed low-latency case leaves whole experts' layouts zero.
    codes, scales, counts = outputs[("ep-low-latency-dispatch", "dev-skew-empty")][-1]
    assert counts[-1].sum() == 0 and codes[-1].eq(0).all() and scales[-1].eq(0).all()
    assert counts[:, 1].sum() == 0


@pytest.mark.parametrize("slug", ["ep-combine", "ep-unpermute-combine"])
def test_skew_leaves_a_whole_rank_idle_at_eight(slug):
    # dev-skew's cold experts 14 and 15 are rank 7's two experts at W = 8: it holds no rows.
    held = [len(rank_inputs(slug, "dev-skew", r, 8)["expert_out"]) for r in range(8)]
    assert held[7] == 0 and held[0] == max(held)


def test_fewer_experts_talks_within_groups_only(reference_outputs):
    world_size, outputs = reference_outputs
    for case in ("dev-fp32", "dev-skew"):
        for r, (_, counts) in enumerate(outputs[("ep-dispatch-fewer-experts", case)]):
            outside = [s for s in range(world_size) if s // 2 != r // 2]
            assert counts[outside].sum() == 0
    # The cold expert 1 is hosted by every odd rank: they receive nothing.
    for r, (recv, _) in enumerate(outputs[("ep-dispatch-fewer-experts", "dev-cold-empty")]):
        assert (len(recv) == 0) == (r % 2 == 1)


def test_ragged_low_latency_ranks_hold_different_token_counts():
    slug, case = "ep-low-latency-dispatch", "dev-bf16-ragged"
    sizes = {len(rank_inputs(slug, case, r, 8)["x"]) for r in range(8)}
    assert len(sizes) > 1 and max(sizes) <= get_problem(slug).dev_cases[1].params["tokens"]


def test_some_drop_leaves_tokens_with_fewer_experts():
    slug = "ep-permute-dispatch"
    routing_map = rank_inputs(slug, "dev-bf16-drop", 0, 2)["routing_map"]
    per_token = routing_map.sum(dim=1)
    assert per_token.max() == 3 and per_token.min() < 3


@pytest.mark.parametrize(
    "params",
    [
        {"tokens": 4000, "experts": 16, "topk": 4},
        {"tokens": 4000, "experts": 16, "topk": 2, "skew": 90, "cold": 3, "drop": 20},
    ],
    ids=["balanced", "skew-cold-drop"],
)
@pytest.mark.parametrize("w", [2, 4, 8])
def test_expected_peer_rows_matches_a_sample(params, w):
    # The byte model's closed form against a count over drawn routings (no drops drawn
    # here, so the drop case's count is made by dropping pairs at random).
    case = Case("sample", "float32", params)
    local, drop = params["experts"] // w, params.get("drop", 0) / 100
    rng = random.Random(1)
    rows = 0
    for r in range(w):
        ctx = InputContext(rank=r, world_size=w, dtype="float32", device="cpu", seed=5)
        for chosen in draw_topk(case, ctx, params["tokens"]).tolist():
            kept = {e // local for e in chosen if rng.random() >= drop}
            rows += len(kept - {r})
    assert rows / w == pytest.approx(expected_peer_rows(case, w), rel=0.03)
