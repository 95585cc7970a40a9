"""Pipeline-parallel references over gloo ranks, against single-process math.

The math rebuilds the whole model from every rank's stage weights and runs it the plain
way in float64: micro-batch by micro-batch through every stage, autograd for the
backward, full causal attention over the reassembled sequence. It knows nothing of
schedules, ticks or messages, so a reference that routes a tensor to the wrong stage,
sums the wrong micro-batches or mixes up halves fails here.
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from problems import all_problems, get_problem
from problems.pipeline import _schedule
from problems.pipeline._stage import DOWN_GAIN, weight
from problems.spec import InputContext
from tests.problems.harness import WORLD_SIZES, Expected, Inputs, check_against, run_references

EMPTY = torch.empty(0)


def _gelu(t: torch.Tensor) -> torch.Tensor:
    return F.gelu(t, approximate="tanh")


def _rms_norm(x: torch.Tensor) -> torch.Tensor:
    return x / x.square().mean(-1, keepdim=True).add(1e-6).sqrt()


def _train(stage_weights: list, x: torch.Tensor, target: torch.Tensor):
    """Losses, input gradient and scaled weight gradients of Σ_m ½‖model(x_m) − t_m‖²."""
    params = [
        (w1.double().requires_grad_(), w2.double().requires_grad_()) for w1, w2 in stage_weights
    ]
    inputs = x.double().requires_grad_()
    losses = []
    for m in range(x.shape[0]):
        h = inputs[m]
        for w1, w2 in params:
            h = h + _gelu(h @ w1) @ w2
        losses.append(0.5 * (h - target[m].double()).square().sum())
    losses = torch.stack(losses)
    losses.sum().backward()
    scale = 1 / math.sqrt(x.shape[0] * x.shape[1] * x.shape[2])
    grads = [(w1.grad * scale, w2.grad * scale) for w1, w2 in params]
    return losses, inputs.grad, grads


def _per_rank(grads: list, where: list[tuple[int, int]], w: int, ends: dict) -> list:
    """Stack stage s's gradients at (rank, chunk) = where[s]; add dx and losses."""
    chunks = max(c for _, c in where) + 1
    out = []
    for r in range(w):
        mine = sorted((c, s) for s, (rank, c) in enumerate(where) if rank == r)
        assert [c for c, _ in mine] == list(range(chunks))
        dw1 = torch.stack([grads[s][0] for _, s in mine])
        dw2 = torch.stack([grads[s][1] for _, s in mine])
        out.append((dw1, dw2, ends["dx"].get(r, EMPTY), ends["losses"].get(r, EMPTY)))
    return out


def one_f_one_b(inputs: Inputs, w: int) -> list:
    weights = [(i["w1"], i["w2"]) for i in inputs]
    losses, dx, grads = _train(weights, inputs[0]["x"], inputs[w - 1]["target"])
    ends = {"dx": {0: dx}, "losses": {w - 1: losses}}
    return [
        (a[0], b[0], c, d) for a, b, c, d in _per_rank(grads, [(s, 0) for s in range(w)], w, ends)
    ]


def interleaved_1f1b(inputs: Inputs, w: int) -> list:
    chunks = inputs[0]["w1"].shape[0]
    where = [(s % w, s // w) for s in range(chunks * w)]
    weights = [(inputs[r]["w1"][c], inputs[r]["w2"][c]) for r, c in where]
    losses, dx, grads = _train(weights, inputs[0]["x"], inputs[w - 1]["target"])
    return _per_rank(grads, where, w, {"dx": {0: dx}, "losses": {w - 1: losses}})


def zero_bubble_v(inputs: Inputs, w: int) -> list:
    where = [(s, 0) if s < w else (2 * w - 1 - s, 1) for s in range(2 * w)]
    weights = [(inputs[r]["w1"][c], inputs[r]["w2"][c]) for r, c in where]
    losses, dx, grads = _train(weights, inputs[0]["x"], inputs[0]["target"])
    return _per_rank(grads, where, w, {"dx": {0: dx}, "losses": {0: losses}})


def stage_send_recv(inputs: Inputs, w: int) -> list:
    outs = []
    for xm in inputs[0]["x"].double():
        for i in inputs:
            xm = _gelu(xm @ i["weight"].double())
        outs.append(xm)
    return [EMPTY] * (w - 1) + [torch.stack(outs)]


def _causal_attention(x: torch.Tensor, i: dict) -> torch.Tensor:
    """One stage on the whole sequence `[B, S, H]`, written out: mask, softmax, sum."""
    wq, wk, wv, wo = (i[n].double() for n in ("wq", "wk", "wv", "wo"))
    normed = _rms_norm(x)
    batch, seq, hidden = x.shape
    heads = i["heads"]
    q, k, v = ((normed @ wt).view(batch, seq, heads, -1) for wt in (wq, wk, wv))
    scores = torch.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(hidden // heads)
    future = torch.arange(seq)[:, None] < torch.arange(seq)[None, :]
    probs = scores.masked_fill(future, -math.inf).softmax(-1)
    return x + torch.einsum("bhqk,bkhd->bqhd", probs, v).reshape(batch, seq, hidden) @ wo


def context_parallel_attention(inputs: Inputs, w: int) -> list:
    full = torch.cat([inputs[0]["x"].double(), inputs[1]["x"].double()], dim=2)
    outs = []
    for xm in full:
        for stage in range(w // 2):
            xm = _causal_attention(xm, inputs[2 * stage])
        outs.append(xm)
    halves = torch.stack(outs).chunk(2, dim=2)
    return [EMPTY] * (w - 2) + list(halves)


EXPECTED: dict[str, Expected] = {
    "pp-stage-send-recv": stage_send_recv,
    "pp-1f1b": one_f_one_b,
    "pp-interleaved-1f1b": interleaved_1f1b,
    "pp-context-parallel-attention": context_parallel_attention,
    "pp-zero-bubble-v": zero_bubble_v,
}


@pytest.fixture(scope="module", params=WORLD_SIZES, ids=lambda w: f"world{w}")
def reference_outputs(request, tmp_path_factory):
    world_size = request.param
    return world_size, run_references(sorted(EXPECTED), world_size, tmp_path_factory.mktemp("rdv"))


def test_every_pipeline_problem_is_here_and_in_its_category():
    pipeline = {p.slug for p in all_problems() if p.category == "pipeline"}
    assert pipeline == set(EXPECTED)
    assert all(slug.startswith("pp-") for slug in pipeline)


@pytest.mark.parametrize("slug", sorted(EXPECTED))
def test_reference_matches_single_process_math(reference_outputs, slug):
    world_size, outputs = reference_outputs
    check_against(slug, world_size, outputs, EXPECTED[slug])


# The schedules as the descriptions state them.

SCHEDULES = {
    "pp-1f1b": lambda r, w, p: _schedule.one_f_one_b(r, w, p["micro_batches"]),
    "pp-interleaved-1f1b": lambda r, w, p: _schedule.interleaved(
        r, w, p["chunks"], p["micro_batches"]
    ),
    "pp-zero-bubble-v": lambda r, w, p: _schedule.zero_bubble_v(r, w, p["micro_batches"]),
}


def _placement(slug: str, w: int, p: dict) -> list[int]:
    if slug == "pp-1f1b":
        return list(range(w))
    if slug == "pp-interleaved-1f1b":
        return [s % w for s in range(p["chunks"] * w)]
    return [s if s < w else 2 * w - 1 - s for s in range(2 * w)]


@pytest.mark.parametrize("slug", sorted(SCHEDULES))
@pytest.mark.parametrize("w", [2, 4, 8])
def test_every_case_schedules_each_action_once_in_micro_batch_order(slug, w):
    problem = get_problem(slug)
    for case in (*problem.dev_cases, *problem.eval_cases):
        p = case.params
        placement = _placement(slug, w, p)
        orders = [SCHEDULES[slug](r, w, p) for r in range(w)]
        kinds = "FBW" if slug == "pp-zero-bubble-v" else "FB"
        for stage, rank in enumerate(placement):
            for kind in kinds:
                mbs = [a.mb for a in orders[rank] if a.kind == kind and a.stage == stage]
                # In order 0..M-1: the weight gradients are summed in micro-batch order.
                assert mbs == list(range(p["micro_batches"])), (case.name, stage, kind)
        assert sum(map(len, orders)) == len(kinds) * len(placement) * p["micro_batches"]
        table = _schedule.ticks(orders, placement)
        assert sum(len(t) for t in table) == sum(map(len, orders))


def test_one_f_one_b_phases():
    order = _schedule.one_f_one_b(1, 4, 6)
    # Two warm-up forwards, then forward/backward pairs, then two cool-down backwards.
    assert [(a.kind, a.mb) for a in order] == [
        ("F", 0), ("F", 1),
        ("F", 2), ("B", 0), ("F", 3), ("B", 1), ("F", 4), ("B", 2), ("F", 5), ("B", 3),
        ("B", 4), ("B", 5),
    ]  # fmt: skip
    # With no bubble to hide, 1F1B in lockstep takes 2(M + W - 1) ticks.
    orders = [_schedule.one_f_one_b(r, 4, 6) for r in range(4)]
    assert len(_schedule.ticks(orders, range(4))) == 2 * (6 + 4 - 1)


def test_interleaved_warm_up_and_chunk_sweep():
    w, v, m = 4, 2, 8
    order = _schedule.interleaved(0, w, v, m)
    warmup = 2 * (w - 1) + (v - 1) * w
    assert all(a.kind == "F" for a in order[:warmup]) and order[warmup + 1].kind == "B"
    # Forwards: micro-batches 0..3 on chunk 0 (stage 0), then on chunk 1 (stage 4), ...
    forwards = [(a.stage, a.mb) for a in order if a.kind == "F"][:12]
    assert forwards == [(0, 0), (0, 1), (0, 2), (0, 3), (4, 0), (4, 1), (4, 2), (4, 3)] + [
        (0, 4),
        (0, 5),
        (0, 6),
        (0, 7),
    ]
    # Backwards start on the last chunk.
    assert [a.stage for a in order if a.kind == "B"][:4] == [4, 4, 4, 4]
    # M == W: every forward first.
    square = _schedule.interleaved(2, w, v, w)
    assert [a.kind for a in square] == ["F"] * (v * w) + ["B"] * (v * w)


def test_zero_bubble_v_turns_on_the_last_rank_and_ends_on_rank_0():
    w = 4
    placement = _placement("pp-zero-bubble-v", w, {})
    assert placement[w - 1] == placement[w] == w - 1 and placement[0] == placement[-1] == 0
    # A middle rank sends 4 messages per micro-batch, the ends 2.
    assert _schedule.busiest_sender(placement, w) == 4
    assert _schedule.busiest_sender(_placement("pp-zero-bubble-v", 2, {}), 2) == 2


def _draw(slug: str, case_name: str, rank: int, w: int) -> dict:
    problem = get_problem(slug)
    case = next(c for c in (*problem.dev_cases, *problem.eval_cases) if c.name == case_name)
    ctx = InputContext(rank=rank, world_size=w, dtype=case.dtype, device="cpu", seed=5)
    return problem.make_inputs(case, ctx)


def test_context_parallel_pairs_share_their_stage_weights():
    w = 8
    drawn = [_draw("pp-context-parallel-attention", "dev-bf16", r, w) for r in range(w)]
    for r in range(0, w, 2):
        assert torch.equal(drawn[r]["wq"], drawn[r + 1]["wq"])
        assert torch.equal(drawn[r]["wo"], drawn[r + 1]["wo"])
    assert not torch.equal(drawn[0]["wq"], drawn[2]["wq"])
    assert not torch.equal(drawn[0]["wq"], drawn[0]["wk"])
    # Only stage 0 holds inputs, and its two halves differ.
    assert [d["x"].shape[0] for d in drawn] == [3, 3] + [0] * 6
    assert not torch.equal(drawn[0]["x"], drawn[1]["x"])


def test_inputs_sit_only_where_the_schedule_needs_them():
    w = 4
    for slug, holders in {
        "pp-stage-send-recv": {"x": {0}},
        "pp-1f1b": {"x": {0}, "target": {w - 1}},
        "pp-interleaved-1f1b": {"x": {0}, "target": {w - 1}},
        "pp-zero-bubble-v": {"x": {0}, "target": {0}},
    }.items():
        drawn = [_draw(slug, "dev-bf16", r, w) for r in range(w)]
        for name, ranks in holders.items():
            assert {r for r in range(w) if drawn[r][name].shape[0] > 0} == ranks, (slug, name)


def test_the_m3_case_leaves_the_pipeline_unfilled():
    case = next(c for c in get_problem("pp-1f1b").dev_cases if c.name == "dev-bf16-m3")
    assert case.params["micro_batches"] < min(w for w in (4, 8))
    orders = [_schedule.one_f_one_b(r, 8, 3) for r in range(8)]
    # Rank 0 never reaches the steady phase: all forwards run before any backward.
    assert [a.kind for a in orders[0]] == ["F"] * 3 + ["B"] * 3


def test_outputs_keep_order_one_scale_through_the_deepest_schedule():
    # The bf16 tolerances assume outputs of order one: 16 stages is V = 2 at W = 8, or ZB-V.
    h, f, stages = 256, 256, 16
    ctx = InputContext(rank=0, world_size=1, dtype="float64", device="cpu", seed=3)
    weights = [(weight(ctx, h, h, f), weight(ctx, f, f, h, gain=DOWN_GAIN)) for _ in range(stages)]
    x, target = ctx.randn(2, 1, 64, h), ctx.randn(2, 1, 64, h)
    _, dx, grads = _train(weights, x, target)
    assert 1 < dx.std() < 8
    for dw1, dw2 in grads:
        assert 0.2 < dw1.std() < 10 and 0.2 < dw2.std() < 10
