"""Other-category references (sort, top-k, histogram, NMS, EnKF) over gloo ranks, against
single-process math.

The math reassembles every rank's shard and works the plain way: numpy's lexsort of
(value, id) pairs, bins found by searching the bin edges, greedy NMS one box at a time
over a full float64 IoU matrix, the Kalman update in ensemble space with an explicit
inverse. It shares no code with the references, so a wrong reference fails here.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

from problems import all_problems, get_problem
from problems.other.nms import IOU_THRESHOLD, SIDES
from tests.problems.harness import (
    SEED,
    WORLD_SIZES,
    Expected,
    Inputs,
    check_against,
    rank_inputs,
    run_references,
)


def _equal_split(n: int, w: int) -> list[slice]:
    return [slice(r * n // w, (r + 1) * n // w) for r in range(w)]


def sample_sort(inputs: Inputs, w: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    keys = torch.cat([i["keys"] for i in inputs])
    ids = np.arange(len(keys))
    order = torch.from_numpy(np.lexsort((ids, keys.double().numpy())))  # last key first
    return [(keys[order[s]], order[s]) for s in _equal_split(len(keys), w)]


def topk(inputs: Inputs, w: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    x, k = torch.cat([i["x"] for i in inputs]), inputs[0]["k"]
    order = torch.from_numpy(np.lexsort((np.arange(len(x)), -x.double().numpy())))[:k]
    return [(x[order], order)] * w


def histogram(inputs: Inputs, w: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    lo, hi, bins = inputs[0]["lo"], inputs[0]["hi"], inputs[0]["bins"]
    inner_edges = [lo + b * (hi - lo) / bins for b in range(1, bins)]
    per_rank = []
    for i in inputs:
        # A value's bin is the number of inner edges at or below it.
        index = np.searchsorted(inner_edges, i["x"].double().numpy(), side="right")
        per_rank.append(np.bincount(index, minlength=bins).astype(np.int64))
    counts = sum(per_rank)
    out = []
    for r in range(w):
        offsets = [sum(counts[:b]) + sum(per_rank[q][b] for q in range(r)) for b in range(bins)]
        out.append((torch.from_numpy(counts), torch.tensor(offsets, dtype=torch.int64)))
    return out


def _iou_matrix(boxes: torch.Tensor) -> torch.Tensor:
    x1, y1, x2, y2 = boxes.double().T
    iw = (torch.minimum(x2[:, None], x2[None]) - torch.maximum(x1[:, None], x1[None])).clamp(min=0)
    ih = (torch.minimum(y2[:, None], y2[None]) - torch.maximum(y1[:, None], y1[None])).clamp(min=0)
    area = (x2 - x1) * (y2 - y1)
    inter = iw * ih
    return inter / (area[:, None] + area[None] - inter)


def _nms_kept(inputs: Inputs) -> list[int]:
    boxes = torch.cat([i["boxes"] for i in inputs])
    scores = torch.cat([i["scores"] for i in inputs]).tolist()
    iou = _iou_matrix(boxes)
    suppressed = torch.zeros(len(boxes), dtype=torch.bool)
    kept = []
    for g in sorted(range(len(boxes)), key=lambda g: (-scores[g], g)):
        if not suppressed[g]:
            kept.append(g)
            suppressed |= iou[g] > IOU_THRESHOLD
    return kept


def nms(inputs: Inputs, w: int) -> list[torch.Tensor]:
    return [torch.tensor(_nms_kept(inputs), dtype=torch.int64)] * w


def kalman(inputs: Inputs, w: int) -> list[torch.Tensor]:
    x = torch.cat([i["ensemble"] for i in inputs])  # [m, n]
    e = torch.cat([i["perturbations"] for i in inputs])  # [m, p]
    obs, var, idx = (inputs[0][k] for k in ("obs", "obs_var", "obs_index"))
    m = len(x)
    a = x - x.mean(dim=0)
    y = a[:, idx]
    # Ensemble space: K d = A^T Y P_yy^-1 d / (m-1) with P_yy = Y^T Y / (m-1) + R.
    p_yy_inv = torch.linalg.inv(y.T @ y / (m - 1) + torch.diag(var))
    d = obs + e - x[:, idx]
    weights = y @ p_yy_inv @ d.T / (m - 1)  # [m, m]: member k's share in member j's update
    updated = x + (a.T @ weights).T
    sizes = [len(i["ensemble"]) for i in inputs]
    return list(updated.split(sizes))


EXPECTED: dict[str, Expected] = {
    "other-sample-sort": sample_sort,
    "other-topk": topk,
    "other-histogram": histogram,
    "other-nms": nms,
    "other-kalman-fp64": kalman,
}


@pytest.fixture(scope="module", params=WORLD_SIZES, ids=lambda w: f"world{w}")
def reference_outputs(request, tmp_path_factory):
    world_size = request.param
    return world_size, run_references(sorted(EXPECTED), world_size, tmp_path_factory.mktemp("rdv"))


def test_every_problem_here_is_in_the_catalog():
    other = {p.slug for p in all_problems() if p.category == "other"}
    assert set(EXPECTED) <= other
    assert other <= set(EXPECTED)


@pytest.mark.parametrize("slug", sorted(EXPECTED))
def test_reference_matches_single_process_math(reference_outputs, slug):
    world_size, outputs = reference_outputs
    check_against(slug, world_size, outputs, EXPECTED[slug])


def _inputs(slug: str, case: str, w: int, seed: int = SEED) -> Inputs:
    return [rank_inputs(slug, case, r, w, seed) for r in range(w)]


@pytest.mark.parametrize("w", [2, 4, 8])
def test_the_empty_cases_leave_a_rank_without_data(w):
    assert len(_inputs("other-sample-sort", "dev-dups-empty", w)[1]["keys"]) == 0
    assert len(_inputs("other-topk", "dev-empty", w)[1]["x"]) == 0
    assert len(_inputs("other-histogram", "dev-empty", w)[1]["x"]) == 0
    assert len(_inputs("other-nms", "dev-empty", w)[1]["boxes"]) == 0
    # Every other rank holds data, and the sizes are ragged.
    sizes = [len(i["keys"]) for i in _inputs("other-sample-sort", "dev-fp32", w)]
    assert min(sizes) > 0 and len(set(sizes)) > 1


def test_uneven_members_leave_a_rank_without_any_at_eight():
    sizes = [len(i["ensemble"]) for i in _inputs("other-kalman-fp64", "dev-uneven", 8)]
    assert 0 in sizes and sum(sizes) == 5
    assert sorted({len(i["ensemble"]) for i in _inputs("other-kalman-fp64", "dev-uneven", 4)}) == [
        1,
        2,
    ]


@pytest.mark.parametrize("w", [2, 4])
def test_sort_and_topk_cases_hold_ties_that_the_ids_must_break(w):
    for case in ("dev-bf16", "dev-dups-empty"):
        keys = torch.cat([i["keys"] for i in _inputs("other-sample-sort", case, w)])
        assert len(keys.unique()) < len(keys) // 2
    # Equal values inside the bf16 top k, and at its border.
    (values, _), *_ = topk(_inputs("other-topk", "dev-bf16", w), w)
    assert len(values.unique()) < len(values)
    x = torch.cat([i["x"] for i in _inputs("other-topk", "dev-bf16", w)])
    assert (x == values[-1]).sum() > (values == values[-1]).sum()


def test_histogram_cases_hit_the_edge_bins_and_the_bin_edges():
    inputs = _inputs("other-histogram", "dev-fp32", 2)
    x = torch.cat([i["x"] for i in inputs])
    assert (x < -4).any() and (x >= 4).any()
    x = torch.cat([i["x"] for i in _inputs("other-histogram", "dev-bf16", 2)]).double()
    on_edges = ((x + 2) * 256 / 8) == ((x + 2) * 256 / 8).floor()
    assert on_edges.sum() > 100


def test_no_iou_the_generator_can_make_is_within_1e_4_of_the_threshold():
    # Integer coordinates: the intersection is iw·ih with 0 <= iw <= min(w1, w2).
    worst = 1.0
    for w1, h1, w2, h2 in itertools.product(SIDES, repeat=4):
        iw = torch.arange(1, min(w1, w2) + 1, dtype=torch.float64)[:, None]
        ih = torch.arange(1, min(h1, h2) + 1, dtype=torch.float64)[None]
        inter = iw * ih
        iou = inter / (w1 * h1 + w2 * h2 - inter)
        worst = min(worst, float((iou - IOU_THRESHOLD).abs().min()))
    assert worst > 1e-4


@pytest.mark.parametrize("w", [2, 4])
def test_nms_cases_suppress_across_seams_and_hold_box_sides_from_the_set(w):
    inputs = _inputs("other-nms", "dev-fp32", w)
    boxes = torch.cat([i["boxes"] for i in inputs])
    assert boxes.eq(boxes.round()).all()
    assert set((boxes[:, 2:] - boxes[:, :2]).unique().tolist()) <= set(SIDES)
    owner = torch.cat([torch.full((len(i["boxes"]),), r) for r, i in enumerate(inputs)])
    kept = _nms_kept(inputs)
    iou = _iou_matrix(boxes)[kept]
    crossing = (iou > IOU_THRESHOLD) & (owner[kept][:, None] != owner[None])
    assert crossing.any(), "some kept box suppresses a box of another rank"
    scores = torch.cat([i["scores"] for i in _inputs("other-nms", "dev-ties", w)])
    assert len(scores.unique()) < len(scores) // 4


def test_eval_cases_stay_small_enough():
    # Per-rank sizes of the inputs: well under 4 GiB of GPU memory with the references'
    # working copies (a few times the inputs).
    for slug in EXPECTED:
        for case in get_problem(slug).eval_cases:
            p = case.params
            if "n" in p and slug != "other-kalman-fp64":
                assert p["n"] * 1.5 * 8 * 8 < 4 * 2**30
    kalman_cases = get_problem("other-kalman-fp64").eval_cases
    assert all(c.params["n"] * c.params["p"] * 8 * 4 < 2**30 for c in kalman_cases)
