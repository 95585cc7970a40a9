"""Expert-parallel layer references (aux loss, MoE forward, grouped GEMM backward, capacity
dispatch, combine backward) over gloo ranks, against single-process float64 math.

The math sees every rank's inputs at once: top-k picks come from counting, per expert, the
logits above it (ties to the lower index), gates from a softmax with the unpicked experts
masked out, the MoE layer runs every expert densely over every token, the backwards come
from autograd, and the capacity buffers are filled by walking slots and tokens in Python
loops. None of it shares code with the references, so a wrong reference fails here.
"""

from __future__ import annotations

import pytest
import torch

from problems import Case, InputContext, all_problems, get_problem
from tests.problems.harness import (
    WORLD_SIZES,
    Expected,
    Inputs,
    check_against,
    rank_inputs,
    run_references,
)

# --- routing by counting -----------------------------------------------------------------


def _picked(logits: torch.Tensor, k: int) -> torch.Tensor:
    """[N, E] bool: expert e is among the token's k picks. An expert's place is the number
    of experts with a larger logit, plus those with an equal logit and a lower index."""
    v = logits.double()
    experts = v.shape[1]
    index = torch.arange(experts)
    larger = v[:, None, :] > v[:, :, None]  # [N, e, other]
    tied_lower = (v[:, None, :] == v[:, :, None]) & (index[None, None, :] < index[None, :, None])
    return (larger | tied_lower).sum(dim=2) < k


def _split(full: torch.Tensor, inputs: Inputs, key: str) -> list[torch.Tensor]:
    return list(full.split([len(i[key]) for i in inputs]))


# --- expected outputs ----------------------------------------------------------------------


def aux_loss(inputs: Inputs, w: int):
    logits = torch.cat([i["logits"].double() for i in inputs])
    k = inputs[0]["topk"]
    tokens, experts = logits.shape
    counts = _picked(logits, k).sum(dim=0)
    mean_prob = logits.softmax(dim=1).mean(dim=0)
    loss = experts * sum(counts[e] / (tokens * k) * mean_prob[e] for e in range(experts))
    return [(loss.float(), counts.long())] * w


def moe_forward(inputs: Inputs, w: int):
    x = torch.cat([i["x"].double() for i in inputs])
    logits = torch.cat([i["router_logits"].double() for i in inputs])
    picked = _picked(logits, inputs[0]["topk"])
    gates = logits.masked_fill(~picked, -torch.inf).softmax(dim=1)
    local = inputs[0]["w1"].shape[0]
    y = torch.zeros_like(x)
    for e in range(logits.shape[1]):
        owner = inputs[e // local]
        w1, w3, w2 = (owner[n][e % local].double() for n in ("w1", "w3", "w2"))
        expert = (torch.nn.functional.silu(x @ w1) * (x @ w3)) @ w2
        y += gates[:, e : e + 1] * expert
    return _split(y, inputs, "x")


def grouped_gemm_backward(inputs: Inputs, w: int):
    partial, grad_xs = [], []
    for i in inputs:
        weight = i["weight"].double().requires_grad_()
        x = i["x"].double().requires_grad_()
        expert_of_row = torch.repeat_interleave(
            torch.arange(len(i["tokens_per_expert"])), i["tokens_per_expert"]
        )
        y = torch.einsum("nh,nhf->nf", x, weight[expert_of_row])
        (y * i["grad_y"].double()).sum().backward()
        grad_xs.append(x.grad)
        partial.append(weight.grad)
    half = w // 2
    return [(grad_xs[r], partial[r] + partial[(r + half) % w]) for r in range(w)]


def capacity_dispatch(inputs: Inputs, w: int):
    experts, capacity = inputs[0]["num_experts"], inputs[0]["capacity"]
    local, hidden = experts // w, inputs[0]["x"].shape[1]
    buffers = [inputs[0]["x"].new_zeros(local, w, capacity, hidden) for _ in range(w)]
    counts = [torch.zeros(local, w, dtype=torch.int64) for _ in range(w)]
    kept = []
    for s, i in enumerate(inputs):
        ids = i["topk_ids"].tolist()
        mine = torch.zeros(len(ids), i["topk_ids"].shape[1], dtype=torch.bool)
        taken = [0] * experts
        for slot in range(i["topk_ids"].shape[1]):
            for t, row in enumerate(ids):
                e = row[slot]
                if taken[e] < capacity:
                    buffers[e // local][e % local, s, taken[e]] = i["x"][t]
                    taken[e] += 1
                    mine[t, slot] = True
        for e in range(experts):
            counts[e // local][e % local, s] = taken[e]
        kept.append(mine)
    return [(buffers[r], counts[r], kept[r]) for r in range(w)]


def _expert_rows(inputs: Inputs, w: int) -> list[list[tuple[int, int, int]]]:
    """Per rank: (source, token, slot) of each expert_out row, in the promised order."""
    experts = inputs[0]["num_experts"]
    local = experts // w
    triples = [
        (e, s, t, j)
        for s, i in enumerate(inputs)
        for t, row in enumerate(i["topk_ids"].tolist())
        for j, e in enumerate(row)
    ]
    return [[(s, t, j) for e, s, t, j in sorted(triples) if e // local == r] for r in range(w)]


def combine_backward(inputs: Inputs, w: int):
    layout = _expert_rows(inputs, w)
    outs = [i["expert_out"].double().requires_grad_() for i in inputs]
    weights = [i["topk_weights"].double().requires_grad_() for i in inputs]
    hidden = inputs[0]["grad_out"].shape[1]
    ys = [torch.zeros(len(i["topk_ids"]), hidden, dtype=torch.float64) for i in inputs]
    for r, rows in enumerate(layout):
        for n, (s, t, j) in enumerate(rows):
            ys[s][t] = ys[s][t] + weights[s][t, j] * outs[r][n]
    total = sum((y * i["grad_out"].double()).sum() for y, i in zip(ys, inputs, strict=True))
    grads = torch.autograd.grad(total, [*outs, *weights], allow_unused=True, materialize_grads=True)
    return [(grads[r], grads[w + r]) for r in range(w)]


EXPECTED: dict[str, Expected] = {
    "ep-aux-loss": aux_loss,
    "ep-moe-forward": moe_forward,
    "ep-grouped-gemm-backward": grouped_gemm_backward,
    "ep-capacity-dispatch": capacity_dispatch,
    "ep-combine-backward": combine_backward,
}


@pytest.fixture(scope="module", params=WORLD_SIZES, ids=lambda w: f"world{w}")
def reference_outputs(request, tmp_path_factory):
    world_size = request.param
    return world_size, run_references(sorted(EXPECTED), world_size, tmp_path_factory.mktemp("rdv"))


def test_every_problem_here_is_in_the_catalog_under_expert():
    catalog = {p.slug: p for p in all_problems()}
    assert set(EXPECTED) <= set(catalog)
    assert all(catalog[slug].category == "expert" for slug in EXPECTED)


@pytest.mark.parametrize("slug", sorted(EXPECTED))
def test_reference_matches_single_process_math(reference_outputs, slug):
    world_size, outputs = reference_outputs
    check_against(slug, world_size, outputs, EXPECTED[slug])


# --- the ragged facts the cases promise ------------------------------------------------------


def _all_ranks(slug: str, case: str, w: int) -> Inputs:
    return [rank_inputs(slug, case, r, w) for r in range(w)]


@pytest.mark.parametrize("w", [2, 4, 8])
def test_skewed_routing_has_a_hot_expert_and_experts_with_no_tokens(w):
    for slug, key in (("ep-aux-loss", "logits"), ("ep-moe-forward", "router_logits")):
        inputs = _all_ranks(slug, "dev-skew", w)
        logits = torch.cat([i[key] for i in inputs])
        k = 2
        counts = _picked(logits, k).sum(dim=0)
        assert counts[0] > 0.8 * len(logits), slug
        assert (counts == 0).any(), slug


@pytest.mark.parametrize("w", [2, 4, 8])
def test_empty_rank_cases_give_rank_one_no_tokens(w):
    for slug, key in (
        ("ep-aux-loss", "logits"),
        ("ep-moe-forward", "x"),
        ("ep-capacity-dispatch", "x"),
        ("ep-combine-backward", "grad_out"),
        ("ep-grouped-gemm-backward", "x"),
    ):
        inputs = _all_ranks(slug, "dev-empty-rank", w)
        sizes = [len(i[key]) for i in inputs]
        assert sizes[1] == 0 and all(n > 0 for r, n in enumerate(sizes) if r != 1), slug


def test_ragged_cases_differ_in_tokens_per_rank():
    sizes = [len(i["logits"]) for i in _all_ranks("ep-aux-loss", "dev-fp32", 4)]
    assert sizes == [24, 22, 20, 18]


def test_router_logits_tie_at_the_kth_pick():
    """Ties at the boundary of the k picks occur, so the tie-break is exercised."""
    for slug, key in (("ep-aux-loss", "logits"), ("ep-moe-forward", "router_logits")):
        inputs = _all_ranks(slug, "dev-bf16", 4)
        k = inputs[0]["topk"]
        logits = torch.cat([i[key].double() for i in inputs])
        ordered = logits.sort(dim=1, descending=True).values
        assert (ordered[:, k - 1] == ordered[:, k]).any(), slug


@pytest.mark.parametrize("w", [2, 4, 8])
def test_capacity_drops_and_leaves_empty_slots(w):
    out = capacity_dispatch(_all_ranks("ep-capacity-dispatch", "dev-skew", w), w)
    kept = torch.cat([o[2].reshape(-1) for o in out])
    counts = torch.stack([o[1] for o in out])
    capacity = get_problem("ep-capacity-dispatch").dev_cases[2].params["capacity"]
    assert not kept.all(), "some pairs are dropped"
    assert (counts == capacity).any() and (counts == 0).any()


@pytest.mark.parametrize("w", [2, 4, 8])
def test_grouped_backward_has_empty_experts_and_equal_replica_weights(w):
    for case in ("dev-bf16", "dev-skew", "dev-empty-rank"):
        inputs = _all_ranks("ep-grouped-gemm-backward", case, w)
        counts = torch.stack([i["tokens_per_expert"] for i in inputs])
        assert (counts == 0).any() and (counts > 0).any()
        for r in range(w):
            assert torch.equal(inputs[r]["weight"], inputs[(r + w // 2) % w]["weight"])
        if w > 2:
            assert not torch.equal(inputs[0]["weight"], inputs[1]["weight"])


def _mean_over_ranks(values: list[float]) -> float:
    return sum(values) / len(values)


def _remote_rows_drawn(problem, case: Case, w: int, seed: int) -> tuple[float, float, float]:
    """Per-rank means of (distinct remote ranks per token, remote pairs, kept remote
    pairs at the case's capacity, if any), counted from one draw of the routing."""
    per_rank = case.params["experts"] // w
    capacity = case.params.get("capacity")
    rows, pairs, kept = [], [], []
    for r in range(w):
        ctx = InputContext(rank=r, world_size=w, dtype=case.dtype, device="cpu", seed=seed)
        ids = problem.make_inputs(case, ctx)["topk_ids"]
        owner = ids // per_rank
        remote = owner != r
        hit = torch.zeros(len(ids), w, dtype=torch.bool).scatter_(1, owner, True)
        hit[:, r] = False
        rows.append(float(hit.sum()))
        pairs.append(float(remote.sum()))
        per_expert = torch.bincount(ids[remote], minlength=case.params["experts"])
        kept.append(float(per_expert.clamp(max=capacity or 1 << 62).sum()))
    return _mean_over_ranks(rows), _mean_over_ranks(pairs), _mean_over_ranks(kept)


@pytest.mark.parametrize("w", [2, 4, 8])
def test_byte_models_match_drawn_routing(w):
    """The byte models' expected row counts agree with counts from the demo cases' draws."""
    from problems.expert._moe_b import expected_remote_pairs, expected_remote_rows

    problem = get_problem("ep-capacity-dispatch")
    for case in problem.eval_cases:
        rows, pairs, kept = _remote_rows_drawn(problem, case, w, seed=11)
        assert expected_remote_rows(case, w) == pytest.approx(rows, rel=0.03)
        assert expected_remote_pairs(case, w) == pytest.approx(pairs, rel=0.03)
        capacity = case.params["capacity"]
        assert expected_remote_pairs(case, w, capacity) == pytest.approx(kept, rel=0.03)
