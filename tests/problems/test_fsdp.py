"""FSDP / ZeRO references over gloo ranks, against single-process math.

The math rebuilds the whole parameters and gradients from every rank's inputs and works in
float64 the plain way: Adam with bias-corrected moments written as interpolations,
autograd for the layer backwards, float8 codes chosen from a table of all 256 patterns,
norms over the reassembled tensors. It shares no code with the references, so a wrong
reference fails here.
"""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist

from problems import InputContext, all_problems, get_problem
from problems.fsdp._shards import chunk_rows
from tests.problems.harness import WORLD_SIZES, Expected, Inputs, check_against, run_references

# ---- ZeRO-1 / ZeRO-2 -------------------------------------------------------------------


def _adamw(i: dict, grad: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """The shard's new (master, m, v) in float64, with m̂ and v̂ spelled out."""
    b1, b2, t = i["beta1"], i["beta2"], i["step"]
    m = i["exp_avg"].double().lerp(grad, 1 - b1)
    v = i["exp_avg_sq"].double().lerp(grad**2, 1 - b2)
    m_hat, v_hat = m / (1 - b1**t), v / (1 - b2**t)
    decayed = i["master"].double() * (1 - i["lr"] * i["weight_decay"])
    return decayed - i["lr"] * m_hat / (v_hat.sqrt() + i["eps"]), m, v


def _zero(inputs: Inputs, w: int, grads: list[torch.Tensor]) -> list[tuple[torch.Tensor, ...]]:
    states = [_adamw(i, g) for i, g in zip(inputs, grads, strict=True)]
    masters = [p.float() for p, _, _ in states]
    params = torch.cat(masters).bfloat16()
    return [
        (params, p32, m.float(), v.float()) for p32, (_, m, v) in zip(masters, states, strict=True)
    ]


def zero1_adam(inputs: Inputs, w: int) -> list[tuple[torch.Tensor, ...]]:
    grad = inputs[0]["grad"].double()
    return _zero(inputs, w, list(grad.chunk(w)))


def zero2_adam(inputs: Inputs, w: int) -> list[tuple[torch.Tensor, ...]]:
    average = torch.stack([i["grad"].double() for i in inputs]).mean(dim=0)
    return _zero(inputs, w, list(average.chunk(w)))


# ---- the FSDP linear layer ------------------------------------------------------------


def _layer(inputs: Inputs, n: int, k: int) -> tuple[torch.Tensor, torch.Tensor, int]:
    flat = torch.cat([i["flat_shard"].double() for i in inputs])
    assert flat.numel() >= n * k + n and not flat[n * k + n :].any(), "padding is zeros"
    return flat[: n * k].reshape(n, k), flat[n * k : n * k + n], flat.numel()


def layer_forward(inputs: Inputs, w: int) -> list[torch.Tensor]:
    n, k = inputs[0]["out_features"], inputs[0]["x"].shape[1]
    weight, bias, _ = _layer(inputs, n, k)
    return [torch.addmm(bias, i["x"].double(), weight.T) for i in inputs]


def layer_backward(inputs: Inputs, w: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    n, k = inputs[0]["grad_out"].shape[1], inputs[0]["x"].shape[1]
    weight, bias, numel = _layer(inputs, n, k)
    weight.requires_grad_()
    bias.requires_grad_()
    xs = [i["x"].double().requires_grad_() for i in inputs]
    loss = sum(
        ((x @ weight.T + bias) * i["grad_out"].double()).sum()
        for x, i in zip(xs, inputs, strict=True)
    )
    loss.backward()
    flat_grad = torch.zeros(numel, dtype=torch.float64)
    flat_grad[: n * k] = weight.grad.flatten() / w
    flat_grad[n * k : n * k + n] = bias.grad / w
    return [(x.grad, g) for x, g in zip(xs, flat_grad.chunk(w), strict=True)]


# ---- FP8 parameter gather --------------------------------------------------------------


def _e4m3_table() -> torch.Tensor:
    """The magnitudes of codes 0..126 (127 is NaN), from the bit layout: 4 exponent bits
    (bias 7, 0 = subnormal), 3 mantissa bits."""
    values = []
    for code in range(127):
        exponent, mantissa = code >> 3, code & 7
        if exponent == 0:
            values.append(mantissa / 8 * 2.0**-6)
        else:
            values.append((1 + mantissa / 8) * 2.0 ** (exponent - 7))
    return torch.tensor(values, dtype=torch.float64)


def _to_e4m3(v: torch.Tensor) -> torch.Tensor:
    """uint8 codes of float64 values within ±448: nearest magnitude, ties to the even
    code, the sign bit from the value's sign."""
    table = _e4m3_table()
    a = v.abs().flatten()
    hi = torch.searchsorted(table, a).clamp(max=126)
    lo = (hi - 1).clamp(min=0)
    d_lo, d_hi = a - table[lo], table[hi] - a
    pick_hi = (d_hi < d_lo) | ((d_hi == d_lo) & (hi % 2 == 0))
    code = torch.where(pick_hi, hi, lo)
    negative = torch.signbit(v.flatten())
    return (code + 128 * negative).to(torch.uint8).view(v.shape)


def fp8_param_gather(inputs: Inputs, w: int) -> list[tuple[torch.Tensor, ...]]:
    floor = torch.tensor(1e-12, dtype=torch.float32).double()
    codes, scales = [], []
    for name in ("wqkv", "wo", "w13", "w2"):
        full = torch.cat([i[name] for i in inputs]).double()
        amax = full.abs().max() if full.numel() else torch.zeros((), dtype=torch.float64)
        # Division of float32 operands rounded once to float32: the same as in float32.
        scale = (448 / torch.maximum(amax, floor)).float()
        scaled = (full * scale.double()).float().double().clamp(-448, 448)
        codes.append(_to_e4m3(scaled))
        scales.append(scale)
    return [(*codes, torch.stack(scales))] * w


# ---- gradient clipping ----------------------------------------------------------------


def _clipped(
    tensors: list[torch.Tensor], shards: list[list[torch.Tensor]], max_norm: float
) -> tuple[torch.Tensor, list[list[torch.Tensor]]]:
    """The norm over the reassembled `tensors`; every rank's `shards`, scaled."""
    total = torch.cat([t.double().flatten() for t in tensors]).norm()
    coef = min(1.0, max_norm / (total.item() + 1e-6))
    return total, [[s.double() * coef for s in per_rank] for per_rank in shards]


CLIP = ("wqkv", "wo", "w13", "w2", "norm", "gate")


def clip_grad_norm(inputs: Inputs, w: int) -> list[tuple[torch.Tensor, ...]]:
    tensors = [torch.cat([i[name] for i in inputs]) for name in CLIP]
    h = inputs[0]["wo"].shape[1]
    assert [t.shape[0] for t in tensors[:2]] == [3 * h, h], "shards rebuild the tensors"
    total, scaled = _clipped(tensors, [[i[n] for n in CLIP] for i in inputs], 1.0)
    return [(total, *s) for s in scaled]


DENSE, EXPERT = ("wqkv", "wo", "norm", "router"), ("w13", "w2")


def clip_grad_norm_expert(inputs: Inputs, w: int) -> list[tuple[torch.Tensor, ...]]:
    dense = [torch.cat([i[name] for i in inputs]) for name in DENSE]
    # Expert set e is spread over the ranks of parity e, in rank order: each distinct
    # expert element is in exactly one of these tensors.
    expert = [torch.cat([i[name] for i in inputs[e::2]]) for e in range(2) for name in EXPERT]
    experts = dense[3].shape[0]
    assert all(t.shape[0] == experts // 2 for t in expert), "shards rebuild the expert sets"
    names = DENSE + EXPERT
    total, scaled = _clipped(dense + expert, [[i[n] for n in names] for i in inputs], 1.0)
    return [(total, *s) for s in scaled]


# ---- 2-D mesh and hybrid sharding ------------------------------------------------------


def mesh_2d_step(inputs: Inputs, w: int) -> list[tuple[torch.Tensor, ...]]:
    d_size = w // 2
    # Rank (d, t) holds rows t·N/2 + d·N/W: TP shard t is its FSDP group's shards in d order.
    weight = torch.cat(
        [torch.cat([inputs[2 * d + t]["w_shard"] for d in range(d_size)]) for t in range(2)]
    ).double()
    weight.requires_grad_()
    xs = [inputs[2 * d]["x"].double().requires_grad_() for d in range(d_size)]
    for d in range(d_size):
        assert torch.equal(inputs[2 * d]["x"], inputs[2 * d + 1]["x"]), "a TP pair shares x"
    ys, loss = [], 0
    for d in range(d_size):
        y = xs[d] @ weight.T  # [M, N]; TP rank t holds columns t·N/2 ...
        halves = y.chunk(2, dim=1)
        ys.append(halves)
        for t in range(2):
            loss = loss + (halves[t] * inputs[2 * d + t]["grad_y"].double()).sum()
    loss.backward()
    rows = weight.shape[0] // w
    out = []
    for r in range(w):
        d, t = r // 2, r % 2
        start = t * weight.shape[0] // 2 + d * rows
        out.append((ys[d][t], xs[d].grad, weight.grad[start : start + rows] / d_size))
    return out


def hybrid_shard(inputs: Inputs, w: int) -> list[torch.Tensor]:
    average = torch.stack([i["grad"].double() for i in inputs]).mean(dim=0)
    halves = average.chunk(2)
    return [halves[r % 2] for r in range(w)]


EXPECTED: dict[str, Expected] = {
    "fsdp-zero1-adam": zero1_adam,
    "fsdp-zero2-adam": zero2_adam,
    "fsdp-layer-forward": layer_forward,
    "fsdp-layer-backward": layer_backward,
    "fsdp-fp8-param-gather": fp8_param_gather,
    "fsdp-clip-grad-norm": clip_grad_norm,
    "fsdp-clip-grad-norm-expert": clip_grad_norm_expert,
    "fsdp-2d-mesh-step": mesh_2d_step,
    "fsdp-hybrid-shard": hybrid_shard,
}


@pytest.fixture(scope="module", params=WORLD_SIZES, ids=lambda w: f"world{w}")
def reference_outputs(request, tmp_path_factory):
    world_size = request.param
    return world_size, run_references(sorted(EXPECTED), world_size, tmp_path_factory.mktemp("rdv"))


def test_every_problem_here_is_in_the_catalog():
    fsdp = {p.slug for p in all_problems() if p.category == "fsdp"}
    assert set(EXPECTED) == fsdp
    assert all(slug.startswith("fsdp-") for slug in fsdp)


@pytest.mark.parametrize("slug", sorted(EXPECTED))
def test_reference_matches_single_process_math(reference_outputs, slug):
    world_size, outputs = reference_outputs
    check_against(slug, world_size, outputs, EXPECTED[slug])


# ---- the ragged and edge facts the descriptions promise --------------------------------


def _inputs(slug: str, case_name: str, world_size: int, seed: int = 1) -> Inputs:
    problem = get_problem(slug)
    case = next(c for c in (*problem.dev_cases, *problem.eval_cases) if c.name == case_name)
    return [
        problem.make_inputs(
            case,
            InputContext(rank=r, world_size=world_size, dtype=case.dtype, device="cpu", seed=seed),
        )
        for r in range(world_size)
    ]


def _empty(inputs: Inputs, names) -> set[tuple[str, int]]:
    return {(n, r) for r, i in enumerate(inputs) for n in names if i[n].shape[0] == 0}


@pytest.mark.parametrize("world_size", [2, 4, 8])
def test_clip_dev_cases_leave_some_shard_empty(world_size):
    empty = _empty(_inputs("fsdp-clip-grad-norm", "dev-bf16", world_size), CLIP)
    assert {("gate", r) for r in range(1, world_size)} <= empty, "gate lives on rank 0 alone"
    if world_size > 2:
        empty = _empty(_inputs("fsdp-clip-grad-norm", "dev-fp32", world_size), CLIP)
        assert ("gate", world_size - 1) in empty
    if world_size == 8:
        assert {("norm", 6), ("norm", 7)} <= empty


def test_clip_expert_cases_leave_expert_and_router_shards_empty():
    for case_name in ("dev-fp32", "dev-unclipped"):
        at8 = _empty(_inputs("fsdp-clip-grad-norm-expert", case_name, 8), DENSE + EXPERT)
        assert {("w13", 6), ("w2", 7), ("router", 6), ("router", 7)} <= at8
        at4 = _empty(_inputs("fsdp-clip-grad-norm-expert", case_name, 4), DENSE + EXPERT)
        assert ("router", 3) in at4


def test_the_demo_with_6_experts_is_ragged_where_promised():
    # The shapes alone, without drawing 86M elements: 3 experts over 4 ranks of a parity.
    assert [chunk_rows(3, 4, d) for d in range(4)] == [1, 1, 1, 0]
    assert [chunk_rows(6, 4, r) for r in range(4)] == [2, 2, 2, 0]
    params = get_problem("fsdp-clip-grad-norm-expert").eval_cases[1].params
    assert params["experts"] == 6


@pytest.mark.parametrize("case_name, clipped", [("dev-fp32", True), ("dev-unclipped", False)])
def test_clip_cases_are_on_the_side_of_max_norm_they_claim(case_name, clipped):
    for slug in ("fsdp-clip-grad-norm", "fsdp-clip-grad-norm-expert"):
        inputs = _inputs(slug, case_name, 4)
        grads = [t for i in inputs for t in i.values() if isinstance(t, torch.Tensor)]
        norm = torch.cat([g.double().flatten() for g in grads]).norm()
        assert (norm > 1.0) == clipped, f"{slug}: norm {norm:.3f}"


def test_clip_scales_the_input_tensors_in_place(tmp_path):
    # One rank is enough to see the reference hand back the very tensors it was given.
    problem = get_problem("fsdp-clip-grad-norm")
    case = problem.dev_cases[0]
    ctx = InputContext(rank=0, world_size=1, dtype=case.dtype, device="cpu", seed=3)
    inputs = problem.make_inputs(case, ctx)
    before = {k: v.clone() for k, v in inputs.items() if isinstance(v, torch.Tensor)}
    dist.init_process_group("gloo", init_method=f"file://{tmp_path}/store", rank=0, world_size=1)
    try:
        total, *grads = problem.reference(**inputs)
    finally:
        dist.destroy_process_group()
    assert all(g is inputs[name] for g, name in zip(grads, CLIP, strict=True))
    coef = 1.0 / (total.item() + 1e-6)
    for name in CLIP:
        torch.testing.assert_close(inputs[name], before[name] * coef)


def test_fp8_dev_cases_cover_an_empty_shard_and_an_all_zero_weight():
    inputs = _inputs("fsdp-fp8-param-gather", "dev-fp32", 8)
    assert [i["wo"].shape[0] for i in inputs] == [2, 2, 2, 2, 2, 2, 1, 0]
    (*codes, scales) = fp8_param_gather(_inputs("fsdp-fp8-param-gather", "dev-bf16-zero-wo", 2), 2)[
        0
    ]
    assert not codes[1].any()
    assert scales[1].item() == pytest.approx(4.48e14, rel=1e-6)
    assert (scales[[0, 2, 3]] < 1e4).all()


def test_the_e4m3_table_agrees_with_the_bit_layout_at_its_landmarks():
    table = _e4m3_table()
    assert table[126].item() == 448.0 and table[1].item() == 2.0**-9 and table[8].item() == 2**-6
    assert _to_e4m3(torch.tensor([-0.0, 2.0**-10, 3 * 2.0**-10, -448.0])).tolist() == [
        128,
        0,
        2,
        254,
    ]


def test_layer_dev_case_pads_the_flat_parameter_at_8_ranks():
    inputs = _inputs("fsdp-layer-forward", "dev-fp32", 8)
    flat = torch.cat([i["flat_shard"] for i in inputs])
    assert flat.numel() == 40 and not flat[36:].any() and flat[35] != 0
