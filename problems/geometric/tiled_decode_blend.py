from __future__ import annotations

import torch
import torch.distributed as dist
import torch.nn.functional as F

from problems.spec import Case, Category, InputContext, Problem, Tolerance

EPS = 1e-5  # of the per-tile normalisation


def tile_grid(height: int, width: int, tile: int, overlap: int) -> tuple[int, int, int]:
    """(tile rows, tile columns, stride) of the latent's tiling; tiles cover it exactly."""
    stride = tile - overlap
    return (height - tile) // stride + 1, (width - tile) // stride + 1, stride


def _decode(z, w1, b1, w2, b2) -> torch.Tensor:
    """[n, Cz, T, T] latents -> [n, 3, 2T, 2T] pixels, each tile on its own."""
    a = torch.einsum("mc,nchw->nmhw", w1, z) + b1[:, None, None]
    # Normalised over the tile, as a VAE decoder's GroupNorm is when tiles decode apart:
    # the reason overlapping tiles disagree and need blending.
    mean = a.mean(dim=(2, 3), keepdim=True)
    var = (a - mean).square().mean(dim=(2, 3), keepdim=True)
    a = F.silu((a - mean) * torch.rsqrt(var + EPS))
    # The 3x3 convolution of the upsampled tile, with channels mixed first at latent
    # resolution (9 taps x 3 outputs, one float32 matmul: no TF32 as in cuDNN's default),
    # then upsampled, zero-padded by one pixel and summed over the 9 shifts.
    n, _, t, _ = a.shape
    taps = w2.permute(0, 2, 3, 1).reshape(27, -1)  # [(o, dy, dx), Cm]
    mixed = F.pad(torch.einsum("kc,nchw->nkhw", taps, a), (1, 1, 1, 1))
    shifted = F.interpolate(mixed, scale_factor=2, mode="nearest")[..., 1:-1, 1:-1]
    shifted = shifted.view(n, 3, 9, 2 * t + 2, 2 * t + 2)
    out = b2[None, :, None, None].expand(n, 3, 2 * t, 2 * t)
    for k in range(9):
        dy, dx = divmod(k, 3)
        out = out + shifted[:, :, k, dy : dy + 2 * t, dx : dx + 2 * t]
    return out


def _ramp(length: int, index: int, count: int, ramp: int, device) -> torch.Tensor:
    """One axis of a tile's blend weight: rises over the overlap with the previous tile,
    falls over the overlap with the next one; pixel k of a ramp weighs (k + 1/2)/ramp."""
    u = torch.arange(length, dtype=torch.float32, device=device) + 0.5
    w = torch.ones_like(u)
    if index > 0:
        w = torch.where(u < ramp, u / ramp, w)
    if index + 1 < count:
        w = torch.where(u > length - ramp, (length - u) / ramp, w)
    return w


def _pieces(row0: int, size: int, band: int, world_size: int) -> list[tuple[int, int, int]]:
    """(band, first, last) image rows of a tile at image row `row0` in each band it meets."""
    first_band, last_band = row0 // band, min(world_size, -(-(row0 + size) // band)) - 1
    return [
        (b, max(row0, b * band), min(row0 + size, (b + 1) * band))
        for b in range(first_band, last_band + 1)
    ]


def _owners(tile_ids: torch.Tensor, n_tiles: int) -> list[int]:
    """Every tile's rank: each rank marks its own tiles, one all-reduce adds the marks."""
    marks = torch.zeros(n_tiles, dtype=torch.int64, device=tile_ids.device)
    marks[tile_ids] = dist.get_rank() + 1
    dist.all_reduce(marks)
    return [m - 1 for m in marks.tolist()]


def solution(
    tiles: torch.Tensor,
    tile_ids: torch.Tensor,
    w1: torch.Tensor,
    b1: torch.Tensor,
    w2: torch.Tensor,
    b2: torch.Tensor,
    height: int,
    width: int,
    overlap: int,
) -> torch.Tensor:
    rank, world_size = dist.get_rank(), dist.get_world_size()
    size = 2 * tiles.shape[-1]  # a decoded tile's side
    rows, cols, stride = tile_grid(height, width, tiles.shape[-1], overlap)
    band = 2 * height // world_size
    owners = _owners(tile_ids, rows * cols)
    # Decode and weight this rank's tiles, then cut each into the row bands it meets.
    to_send: list[list[torch.Tensor]] = [[] for _ in range(world_size)]
    if len(tiles):
        decoded = _decode(tiles, w1, b1, w2, b2)
        for i, t in enumerate(tile_ids.tolist()):
            ty, tx = divmod(t, cols)
            ramp = 2 * overlap
            weight = _ramp(size, ty, rows, ramp, tiles.device)[:, None] * _ramp(
                size, tx, cols, ramp, tiles.device
            )
            weighted = decoded[i] * weight
            for b, lo, hi in _pieces(2 * ty * stride, size, band, world_size):
                to_send[b].append(weighted[:, lo - 2 * ty * stride : hi - 2 * ty * stride])
    send_sizes = [sum(p.numel() for p in pieces) for pieces in to_send]
    flat = [p.reshape(-1) for pieces in to_send for p in pieces]
    send = torch.cat(flat) if flat else tiles.new_empty(0)
    # What arrives, in source-rank then tile-id order: every rank knows every owner.
    arriving = [[] for _ in range(world_size)]
    for t in range(rows * cols):
        ty, tx = divmod(t, cols)
        for b, lo, hi in _pieces(2 * ty * stride, size, band, world_size):
            if b == rank:
                arriving[owners[t]].append((lo, hi, 2 * tx * stride))
    recv_sizes = [sum(3 * (hi - lo) * size for lo, hi, _ in a) for a in arriving]
    recv = tiles.new_empty(sum(recv_sizes))
    dist.all_to_all_single(recv, send, recv_sizes, send_sizes)
    image = tiles.new_zeros(3, band, 2 * width)
    offset = 0
    for lo, hi, col in (piece for a in arriving for piece in a):
        n = 3 * (hi - lo) * size
        piece = recv[offset : offset + n].view(3, hi - lo, size)
        image[:, lo - rank * band : hi - rank * band, col : col + size] += piece
        offset += n
    return image


def make_inputs(case: Case, ctx: InputContext) -> dict:
    p = case.params
    channels, hidden, tile = p["channels"], p["hidden"], p["tile"]
    rows, cols, stride = tile_grid(p["height"], p["width"], tile, p["overlap"])
    # Shared draws first, in one order on every rank: the latent, the deal, the decoder.
    latent = ctx.randn(channels, p["height"], p["width"], shared=True)
    # Tiles are shuffled and dealt round-robin over the ranks that take tiles: counts
    # differ by one where W does not divide the tile count, and a rank gets none when
    # there are fewer tiles than ranks or when it is the case's `empty_rank`.
    takers = [r for r in range(ctx.world_size) if r != p.get("empty_rank", -1)]
    deal = torch.randperm(rows * cols, generator=ctx.gen(shared=True), device=ctx.device)
    mine = sorted(t for i, t in enumerate(deal.tolist()) if takers[i % len(takers)] == ctx.rank)
    crops = [
        latent[:, ty * stride : ty * stride + tile, tx * stride : tx * stride + tile]
        for ty, tx in (divmod(t, cols) for t in mine)
    ]
    return {
        "tiles": torch.stack(crops) if crops else latent.new_empty(0, channels, tile, tile),
        "tile_ids": torch.tensor(mine, dtype=torch.int64, device=ctx.device),
        "w1": ctx.randn(hidden, channels, shared=True) * channels**-0.5,
        "b1": 0.1 * ctx.randn(hidden, shared=True),
        "w2": ctx.randn(3, hidden, 3, 3, shared=True) * (9 * hidden) ** -0.5,
        "b2": 0.1 * ctx.randn(3, shared=True),
        "height": p["height"],
        "width": p["width"],
        "overlap": p["overlap"],
    }


def bytes_moved(case: Case, world_size: int) -> int:
    # Expected value under the deal: a tile's owner is uniform over the A ranks that take
    # tiles, and its rows in band b cross the links unless b owns it (probability 1/A
    # when b takes tiles). The A ranks that take tiles share the total.
    # Decoded rows (3 values per pixel) are smaller than the latent rows that make them
    # (Cz/4 per pixel, Cz = 16), so pixels are what travel.
    p = case.params
    rows, cols, stride = tile_grid(p["height"], p["width"], p["tile"], p["overlap"])
    size, band = 2 * p["tile"], 2 * p["height"] // world_size
    takers = world_size - (0 <= p.get("empty_rank", -1) < world_size)
    total = 0.0
    for ty in range(rows):
        for b, lo, hi in _pieces(2 * ty * stride, size, band, world_size):
            stays = 1 / takers if b != p.get("empty_rank", -1) else 0.0
            total += cols * (hi - lo) * 3 * size * case.itemsize * (1 - stays)
    return max(1, round(total / takers))


PROBLEM = Problem(
    slug="geo-tiled-decode-blend",
    title="Tiled decode with overlap blending across ranks",
    category=Category.GEOMETRIC,
    description=(
        "Tiled decoding of a large image latent with linear-ramp blending of the "
        "overlaps, as VAE decoders of diffusion models decode 4K images and long videos "
        "(diffusers' tiled VAE decode), spread over ranks as patch-parallel pipelines "
        "(DistriFusion, xDiT's parallel VAE) hold the latent's patches. The latent "
        "`[Cz, h, w]` is cut into tiles of T × T latent pixels with stride S = T − O "
        "(overlap O ≤ T/2), tile rows and columns `ty < (h−T)/S + 1`, `tx < (w−T)/S + 1` "
        "(exact cover), tile id `ty·cols + tx`, tile (ty, tx) covering latent rows "
        "`[ty·S, ty·S + T)` and columns `[tx·S, tx·S + T)`. Tiles are dealt to ranks at "
        "random: rank r holds `tiles` `[n_r, Cz, T, T]` float32 and their ids `tile_ids` "
        "`[n_r]` int64 ascending; n_r differs by rank and is 0 on some rank in some "
        "cases. Every rank holds the decoder's `w1` `[Cm, Cz]`, `b1` `[Cm]`, `w2` "
        "`[3, Cm, 3, 3]`, `b2` `[3]` (float32) and the ints `height` = h, `width` = w, "
        "`overlap` = O. A tile decodes on its own into `[3, 2T, 2T]` pixels: "
        "`a = w1·z + b1` per pixel; each channel of a normalised over the tile's T² "
        "pixels, `(a − mean) / sqrt(var + 1e-5)` (biased variance); SiLU; nearest "
        "upsampling by 2; a 3×3 convolution with `w2`, `b2` and zero padding at the "
        "tile's border. Each decoded tile is weighted by `ωy[i]·ωx[j]` (tile pixel i, j) "
        "with, along each axis, ω = (k + 1/2)/(2O) on its first 2O pixels (k = 0…2O−1) "
        "when a previous tile exists along that axis, (2O − k − 1/2)/(2O) on its last 2O "
        "pixels when a next tile exists, and 1 elsewhere; the weights of the tiles over "
        "a pixel sum to 1. The image `[3, 2h, 2w]` is the sum of the weighted tiles "
        "placed at pixel `(2·ty·S, 2·tx·S)`. Rank r returns its row band of it, "
        "`[3, 2h/W, 2w]` float32: image rows `[r·2h/W, (r+1)·2h/W)`. Arithmetic is "
        "float32 (no TF32; statistics summed in blocks or a tree, not one running "
        "sum).\n\n"
        "The reference learns every tile's owner (each rank marks its ids, one "
        "all-reduce), decodes and weights its tiles, cuts each into the row bands it "
        "meets and sends every piece to the band's owner in one ragged "
        "`all_to_all_single` (sizes known to all from the owner map), then adds the "
        "pieces it receives into its band. Tiles straddle band boundaries (at W = 8 a 4K "
        "tile meets two or three bands) and a random deal puts most tiles on a rank "
        "that owns none of their rows. A kernel can stream finished tile rows into the "
        "band owners' symmetric buffers as the decoder produces them, accumulate with "
        "remote adds instead of a receive buffer, and decode the tiles that leave first."
    ),
    reference=solution,
    make_inputs=make_inputs,
    bytes_moved=bytes_moved,
    # Pixels have scale ~0.5. Sums over Cz and 9·Cm products and the tile statistics in
    # another order move them by ~1e-6; at most four tiles meet at a pixel. A ramp off by
    # half a pixel (k/2O instead of (k + 1/2)/2O) moves a blended pixel by
    # |difference of the tiles| / 4O, above 1e-3 at O = 72, and a missing piece by ~0.5.
    # TF32 (a 10-bit mantissa, ~1e-3 relative) would not pass, as it would hide that.
    tolerances={"float32": Tolerance(atol=1e-4, rtol=1e-4)},
    dev_cases=(
        Case(
            "dev-fp32",
            "float32",
            {"channels": 4, "hidden": 8, "height": 20, "width": 26, "tile": 8, "overlap": 2},
        ),
        # Three tiles: at W = 4 a rank has none, at W = 2 one rank holds two.
        Case(
            "dev-few-tiles",
            "float32",
            {"channels": 4, "hidden": 8, "height": 8, "width": 20, "tile": 8, "overlap": 2},
        ),
        Case(
            "dev-empty-rank",
            "float32",
            {
                "channels": 4,
                "hidden": 6,
                "height": 24,
                "width": 24,
                "tile": 10,
                "overlap": 3,
                "empty_rank": 1,
            },
        ),
    ),
    eval_cases=(
        # A 4K frame (2160 x 3840 pixels) in 6 x 11 tiles of 480 pixels, 144 overlapping.
        Case(
            "demo-4k",
            "float32",
            {
                "channels": 16,
                "hidden": 32,
                "height": 1080,
                "width": 1920,
                "tile": 240,
                "overlap": 72,
            },
        ),
        # 2 x 3 tiles: fewer than W = 8, and rank 1 takes none.
        Case(
            "demo-six-tiles-empty-rank",
            "float32",
            {
                "channels": 16,
                "hidden": 32,
                "height": 448,
                "width": 640,
                "tile": 256,
                "overlap": 64,
                "empty_rank": 1,
            },
        ),
    ),
)
