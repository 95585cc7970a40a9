from __future__ import annotations

import torch
import torch.distributed as dist

from problems.other._shards import all_sizes
from problems.spec import EXACT, Case, Category, InputContext, Problem

IOU_THRESHOLD = 0.5
# Box sides in pixels, all ≡ 1 (mod 3): areas are ≡ 1 and two areas sum to ≡ 2 (mod 3),
# never to 3·I for an integer intersection I. So no IoU I/U equals 1/2, and
# |I/U − 1/2| = |3I − A1 − A2| / 2U ≥ 1/(2·2·46²) > 1.1e-4: no float rounding of the IoU
# can flip a decision.
SIDES = (16, 22, 28, 34, 40, 46)
# Neighbouring tiles overlap: an object within this many pixels of a seam is seen by both.
MARGIN = 64
JITTER = 6  # pixels between the proposals of one object
_NEIGHBOURS = [(dx, dy) for dx in (-1, 0, 1) for dy in (-1, 0, 1)]


def _gather_boxes(boxes: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
    """Every rank's [x1, y1, x2, y2, score] rows in rank order: global index = row."""
    sizes = all_sizes(len(boxes), boxes.device)
    longest = max(sizes)
    rows = boxes.new_zeros(longest, 5)
    rows[: len(boxes), :4], rows[: len(boxes), 4] = boxes, scores
    table = rows.new_empty(len(sizes) * longest, 5)
    dist.all_gather_into_tensor(table, rows)
    real = (
        torch.arange(longest, device=boxes.device)
        < torch.tensor(sizes, device=boxes.device)[:, None]
    )
    return table[real.reshape(-1)]


def _ragged_arange(starts: torch.Tensor, counts: torch.Tensor, total: int) -> torch.Tensor:
    """cat([arange(s, s + c) for s, c in zip(starts, counts)]), total = counts.sum()."""
    firsts = (counts.cumsum(0) - counts).repeat_interleave(counts, output_size=total)
    within = torch.arange(total, device=counts.device) - firsts
    return starts.repeat_interleave(counts, output_size=total) + within


def _candidate_pairs(boxes: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Every (i, j) whose boxes may intersect (both orders, and i = j), from a grid.

    With cells as wide as the largest box side, two intersecting boxes have top-left
    corners in the same or in adjacent cells.
    """
    corners = boxes[:, :2].double()
    side = (boxes[:, 2:] - boxes[:, :2]).max().double().clamp(min=1.0)
    cell = ((corners - corners.min(dim=0).values) / side).floor().long()
    height = int(cell[:, 1].max().item()) + 3  # room for cy + 1 without wrapping
    keys, perm = (cell[:, 0] * height + cell[:, 1]).sort()
    step = torch.tensor(_NEIGHBOURS, device=boxes.device)  # [9, 2]
    query = (keys.new_tensor([height, 1]) * (cell[:, None] + step)).sum(dim=2).reshape(-1)
    first = torch.searchsorted(keys, query)
    counts = torch.searchsorted(keys, query, right=True) - first
    # A row index of -1 would alias the last row of the previous column.
    counts *= (cell[:, None, 1] + step[:, 1] >= 0).reshape(-1)
    total = int(counts.sum().item())
    i = torch.arange(len(boxes), device=boxes.device).repeat_interleave(
        counts.view(-1, len(_NEIGHBOURS)).sum(dim=1), output_size=total
    )
    return i, perm[_ragged_arange(first, counts, total)]


def _suppression_edges(boxes: torch.Tensor, priority: torch.Tensor):
    """(src, dst): src comes first in score order and IoU(src, dst) > IOU_THRESHOLD."""
    i, j = _candidate_pairs(boxes)
    x1, y1, x2, y2 = boxes.T.contiguous()  # columns: gathers of single floats are fast
    iw = (torch.minimum(x2[i], x2[j]) - torch.maximum(x1[i], x1[j])).clamp(min=0)
    ih = (torch.minimum(y2[i], y2[j]) - torch.maximum(y1[i], y1[j])).clamp(min=0)
    inter = iw * ih
    area = (x2 - x1) * (y2 - y1)
    over = inter / (area[i] + area[j] - inter) > IOU_THRESHOLD
    edge = (over & (priority[i] < priority[j])).nonzero()[:, 0]
    return i[edge], j[edge]


# Box states in the greedy rounds, chosen so that one sum over a box's suppressors says
# whether one of them is kept (>= KEPT) and whether any is still open (> 0). A box has far
# fewer than 2**16 suppressors.
KEPT, OPEN, GONE = 1 << 16, 1, 0
CHECK_EVERY = 4  # rounds between host syncs; rounds after the last settlement change nothing


def _greedy(src: torch.Tensor, dst: torch.Tensor, n: int) -> torch.Tensor:
    """Greedy NMS in rounds: a box is kept once every box that could suppress it is
    suppressed, and suppressed once one of them is kept. Each round settles at least the
    first unsettled box in score order, so this ends with greedy NMS's exact answer."""
    state = torch.full((n,), OPEN, dtype=torch.int32, device=src.device)
    while True:
        for _ in range(CHECK_EVERY):
            tally = torch.zeros_like(state).index_add_(0, dst, state[src])
            settled = torch.where(tally == 0, KEPT, torch.where(tally >= KEPT, GONE, OPEN))
            state = torch.where(state == OPEN, settled, state)
        if not bool((state == OPEN).any()):
            return state == KEPT


def solution(boxes: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
    everything = _gather_boxes(boxes, scores)
    if not len(everything):
        return scores.new_empty(0, dtype=torch.int64)
    # A stable descending sort keeps equal scores in global index order.
    order = everything[:, 4].sort(descending=True, stable=True).indices
    priority = torch.empty_like(order)
    priority[order] = torch.arange(len(order), device=order.device)
    src, dst = _suppression_edges(everything[:, :4], priority)
    kept = _greedy(src, dst, len(everything))
    return order[kept[order]]


def _proposals(case: Case, ctx: InputContext) -> tuple[torch.Tensor, torch.Tensor]:
    """Integer-valued boxes and float32 scores: a few jittered proposals per object seen."""
    p, world_size, dev = case.params, ctx.world_size, ctx.device
    objects, tile, height = p["objects"], p["tile"], p["height"]
    # The scene is shared: every rank draws every tile's objects in the same order.
    per_tile = ctx.randint(
        objects - objects // 2, objects + objects // 2 + 1, world_size, shared=True
    )
    total = int(per_tile.sum().item())
    tile_of = torch.arange(world_size, device=dev).repeat_interleave(per_tile)
    centre = torch.stack(
        [
            tile_of * tile + ctx.randint(0, tile, total, shared=True),
            ctx.randint(0, height, total, shared=True),
        ],
        dim=1,
    )
    shape = ctx.randint(0, len(SIDES), total, 2, shared=True)
    confidence = torch.rand(total, generator=ctx.gen(shared=True), device=dev)
    if ctx.rank == p.get("empty_rank", -1):
        return torch.zeros(0, 4, device=dev), torch.zeros(0, device=dev)

    lo, hi = ctx.rank * tile - MARGIN, (ctx.rank + 1) * tile + MARGIN
    seen = ((centre[:, 0] >= lo) & (centre[:, 0] < hi)).nonzero()[:, 0]
    obj = seen.repeat_interleave(ctx.randint(1, p["per_object"] + 1, len(seen)))
    sides = torch.tensor(SIDES, device=dev)
    wh = sides[(shape[obj] + ctx.randint(-1, 2, len(obj), 2)).clamp(0, len(SIDES) - 1)]
    corner = centre[obj] + ctx.randint(-JITTER, JITTER + 1, len(obj), 2) - wh // 2
    limit = torch.tensor([world_size * tile, height], device=dev)
    corner = torch.minimum(corner.clamp(min=0), limit - wh)
    boxes = torch.cat([corner, corner + wh], dim=1).float()
    noise = torch.rand(len(obj), generator=ctx.gen(), device=dev)
    scores = confidence[obj] * (0.5 + 0.5 * noise)
    if p.get("levels", 0):
        # Scores exported on a coarse grid: many exact ties, ordered by global index.
        scores = (scores * p["levels"]).floor() / p["levels"]
    return boxes, scores


def make_inputs(case: Case, ctx: InputContext) -> dict:
    boxes, scores = _proposals(case, ctx)
    return {"boxes": boxes, "scores": scores}


def bytes_moved(case: Case, world_size: int) -> int:
    # Expected values under the generator: a rank sees ~objects·(1 + 2·MARGIN/tile)
    # objects with (per_object+1)/2 proposals each. Fewest: the boxes whose objects lie
    # near a seam (2·2·MARGIN/tile of them: 20 bytes of box and score) go to the
    # neighbours, and every rank learns the kept indices (about one per object, 4 bytes)
    # of every other rank.
    p = case.params
    boxes = p["objects"] * (1 + 2 * MARGIN / p["tile"]) * (p["per_object"] + 1) / 2
    seams = boxes * 4 * MARGIN / p["tile"] * 20
    return int(seams + (world_size - 1) * p["objects"] * 4)


PROBLEM = Problem(
    slug="other-nms",
    title="Non-maximum suppression across ranks",
    category=Category.OTHER,
    description=(
        "Global greedy non-maximum suppression of object detections made on several "
        "GPUs, as in tiled inference of large aerial or gigapixel images (SAHI-style "
        "slicing with detectron2, MMDetection or torchvision's `nms`): each rank detects "
        "in its own vertical tile of a shared scene, tiles overlap by 64 px, so objects "
        "near a seam are found by both ranks. Rank r holds `boxes` `[n_r, 4]` "
        "(x1, y1, x2, y2, float32) and `scores` `[n_r]` (float32); `n_r` depends on the "
        "scene and differs by rank and trial, and is 0 on some rank in some cases. A box's "
        "global index is its row plus the sizes of the ranks before it. Order all boxes by "
        "descending score, equal scores (frequent in the cases with coarse scores) by "
        "ascending global index; walk that order keeping a box unless an already kept box "
        "has IoU > 0.5 with it. IoU = inter / (area_a + area_b − inter), area = (x2 − x1)·"
        "(y2 − y1), inter the product of the clamped-at-zero overlaps in x and y. Every "
        "rank returns the kept global indices in that order, `[K]` int64, compared "
        "exactly. Coordinates are integers and box sides come from {16, 22, 28, 34, 40, "
        "46}, so no IoU lies within 1e-4 of 0.5: float32 and float64 IoUs decide alike.\n\n"
        "The reference all-gathers the sizes and the boxes with their scores (padded to the "
        "largest rank), and every rank runs the same NMS: a stable sort by score, the "
        "candidate pairs from a uniform grid of the largest box side, their IoUs, and the "
        "greedy walk settled in parallel rounds (a box is kept once every box that could "
        "suppress it is suppressed; one scatter-add per round), with a host sync every "
        "four rounds; about ten rounds settle the demo scenes. Boxes interact only "
        "near one another: most of a rank's boxes are decided by its own tile, and only "
        "those near a seam, plus the kept indices, have to cross the links, which a "
        "kernel can exchange with its neighbours over symmetric memory."
    ),
    reference=solution,
    make_inputs=make_inputs,
    bytes_moved=bytes_moved,
    tolerances=EXACT,
    dev_cases=(
        Case("dev-fp32", "float32", {"objects": 20, "per_object": 6, "tile": 256, "height": 256}),
        Case(
            "dev-ties",
            "float32",
            {"objects": 24, "per_object": 8, "tile": 256, "height": 192, "levels": 16},
        ),
        Case(
            "dev-empty",
            "float32",
            {"objects": 16, "per_object": 6, "tile": 200, "height": 200, "empty_rank": 1},
        ),
    ),
    eval_cases=(
        Case(
            "demo-100k",
            "float32",
            {"objects": 2500, "per_object": 16, "tile": 4096, "height": 4096},
        ),
        Case(
            "demo-ties-empty",
            "float32",
            {
                "objects": 3500,
                "per_object": 16,
                "tile": 4096,
                "height": 8192,
                "levels": 256,
                "empty_rank": 1,
            },
        ),
    ),
)
