from __future__ import annotations

import torch
import torch.distributed as dist

from problems.spec import Case, Category, InputContext, Problem, Tolerance

NEAR = 0.2  # the near plane: depth must exceed it
MARGIN = 0.15  # visible means lie within 15% of the image's size beyond its edges
BLUR = 0.3  # added to the 2-D covariance's diagonal (pixels²), as 3DGS does
# The generator keeps every (camera, Gaussian) pair this far from a visibility bound (in
# float64), so that no float32 rounding can flip a flag.
DEPTH_GAP = 1e-3
PIXEL_GAP = 0.05
# And no visible footprint is wider than this (pixels of standard deviation): float32
# errors in cov_xy grow with the footprint's area (see the tolerance).
FOOTPRINT = 256
FIELDS = 7  # u, v, cov_xx, cov_xy, cov_yy, depth, visible


def _rotation(quats: torch.Tensor) -> torch.Tensor:
    """[G, 4] quaternions (w, x, y, z), any norm -> [G, 3, 3] rotation matrices."""
    w, x, y, z = (quats / quats.norm(dim=1, keepdim=True)).unbind(1)
    rows = [
        [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
        [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
        [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
    ]
    return torch.stack([torch.stack(r, dim=1) for r in rows], dim=1)


def _covariance(log_scales: torch.Tensor, quats: torch.Tensor) -> torch.Tensor:
    """Σ = R·diag(s²)·Rᵀ, [G, 3, 3]."""
    rs = _rotation(quats) * log_scales.exp()[:, None, :]  # R·diag(s)
    return rs @ rs.transpose(1, 2)


def _raw(means: torch.Tensor, cov: torch.Tensor, cams: torch.Tensor) -> list[torch.Tensor]:
    """u, v, cov_xx, cov_xy, cov_yy, depth of every Gaussian in every camera, [C, G] each,
    unmasked."""
    rot, trans = cams[:, :12].reshape(-1, 3, 4).split([3, 1], dim=2)  # [C, 3, 3], [C, 3, 1]
    fx, fy, cx, cy = (v[:, None] for v in cams[:, 16:].unbind(1))  # [C, 1] each
    p = torch.einsum("cij,gj->cgi", rot, means) + trans[:, None, :, 0]  # camera space
    x, y, z = p.unbind(2)
    tx, ty = x / z, y / z
    # The rows of J·R_view, J the Jacobian of (u, v) by the camera-space point.
    row0 = (fx / z)[..., None] * (rot[:, None, 0] - tx[..., None] * rot[:, None, 2])
    row1 = (fy / z)[..., None] * (rot[:, None, 1] - ty[..., None] * rot[:, None, 2])
    cov_row0 = torch.einsum("gij,cgj->cgi", cov, row0)
    cov_row1 = torch.einsum("gij,cgj->cgi", cov, row1)
    return [
        fx * tx + cx,
        fy * ty + cy,
        (row0 * cov_row0).sum(2) + BLUR,
        (row1 * cov_row0).sum(2),
        (row1 * cov_row1).sum(2) + BLUR,
        z,
    ]


def _bounds(width: int, height: int) -> list[tuple[int, float]]:
    """(field, bound) pairs of the visible window: u in (lo, hi), v in (lo, hi)."""
    return [
        (0, -MARGIN * width),
        (0, (1 + MARGIN) * width),
        (1, -MARGIN * height),
        (1, (1 + MARGIN) * height),
    ]


def _visible(fields: list[torch.Tensor], width: int, height: int) -> torch.Tensor:
    u, v, z = fields[0], fields[1], fields[5]
    inside = (u > -MARGIN * width) & (u < (1 + MARGIN) * width)
    return (z > NEAR) & inside & (v > -MARGIN * height) & (v < (1 + MARGIN) * height)


def _project(
    means: torch.Tensor, cov: torch.Tensor, cams: torch.Tensor, width: int, height: int
) -> torch.Tensor:
    """Every Gaussian in every camera: [C, G, FIELDS] float32, zeros where culled."""
    fields = _raw(means, cov, cams)
    visible = _visible(fields, width, height)
    masked = [torch.where(visible, f, 0.0) for f in fields[:5]]
    return torch.stack([*masked, fields[5], visible.float()], dim=2)


def _counts(cameras: int, gaussians: int, device: torch.device) -> torch.Tensor:
    """[W, 2]: every rank's (cameras, Gaussians), one all-gather."""
    counts = torch.empty(dist.get_world_size(), 2, dtype=torch.int64, device=device)
    dist.all_gather_into_tensor(counts, torch.tensor([[cameras, gaussians]], device=device))
    return counts


def _gather_cameras(cams: torch.Tensor, sizes: list[int]) -> torch.Tensor:
    """Every rank's [C_r, 20] camera rows, in rank order (padded to the longest)."""
    longest = max(sizes)
    padded = cams.new_zeros(longest, cams.shape[1])
    padded[: len(cams)] = cams
    table = cams.new_empty(len(sizes) * longest, cams.shape[1])
    dist.all_gather_into_tensor(table, padded)
    return torch.cat([table[s * longest : s * longest + n] for s, n in enumerate(sizes)])


def solution(
    means: torch.Tensor,
    log_scales: torch.Tensor,
    quats: torch.Tensor,
    viewmats: torch.Tensor,
    intrinsics: torch.Tensor,
    width: int,
    height: int,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    rank = dist.get_rank()
    counts = _counts(len(viewmats), len(means), means.device).tolist()
    cam_sizes, gauss_sizes = [c for c, _ in counts], [g for _, g in counts]
    cams = torch.cat([viewmats.reshape(-1, 16), intrinsics], dim=1)
    every_camera = _gather_cameras(cams, cam_sizes)  # global camera order = rank order
    packed = _project(means, _covariance(log_scales, quats), every_camera, width, height)
    # Camera c's rows go to its owner: cameras are grouped by owner, so each owner's
    # share of `packed` is one contiguous run.
    mine = cam_sizes[rank]
    send_sizes = [c * len(means) * FIELDS for c in cam_sizes]
    recv_sizes = [mine * g * FIELDS for g in gauss_sizes]
    recv = packed.new_empty(sum(recv_sizes))
    dist.all_to_all_single(recv, packed.reshape(-1), recv_sizes, send_sizes)
    # Sources in rank order are the Gaussians in global id order.
    parts = zip(recv.split(recv_sizes), gauss_sizes, strict=True)
    rows = torch.cat([part.view(mine, g, FIELDS) for part, g in parts], dim=1)
    return (
        rows[..., 0:2].contiguous(),
        rows[..., 2:5].contiguous(),
        rows[..., 5].contiguous(),
        rows[..., 6] > 0.5,
    )


def _uniform(ctx: InputContext, *shape: int, low: float, high: float, shared: bool = False):
    drawn = torch.rand(shape, generator=ctx.gen(shared=shared), device=ctx.device)
    return low + (high - low) * drawn


def _unit(v: torch.Tensor) -> torch.Tensor:
    return v / v.norm(dim=-1, keepdim=True)


def _cameras(ctx: InputContext, n: int, width: int, height: int):
    """n cameras 4 to 6 units from the origin, looking near it with a random roll:
    [n, 4, 4] world-to-camera matrices (x right, y down, z forward) and [n, 4] intrinsics."""
    centre = _unit(ctx.randn(n, 3, shared=True)) * _uniform(ctx, n, 1, low=4, high=6, shared=True)
    forward = _unit(0.5 * ctx.randn(n, 3, shared=True) - centre)
    right = _unit(torch.linalg.cross(ctx.randn(n, 3, shared=True), forward))
    down = torch.linalg.cross(forward, right)
    rot = torch.stack([right, down, forward], dim=1)
    view = torch.eye(4, device=ctx.device).repeat(n, 1, 1)
    view[:, :3, :3], view[:, :3, 3] = rot, -(rot @ centre[:, :, None])[..., 0]
    focal = width * _uniform(ctx, n, low=0.6, high=1.0, shared=True)
    half = torch.full_like(focal, 0.5)
    intrinsics = torch.stack([focal, focal, half * width, half * height], dim=1)
    return view, intrinsics


def _points(ctx: InputContext, n: int, view: torch.Tensor, intrinsics: torch.Tensor, size):
    """A scene's Gaussian centres: 85% an object around the origin, 10% a background
    shell, 5% floaters just in front of some camera (depth 0.05 to 0.6, inside its
    view), a quarter of them before the near plane."""
    kind = _uniform(ctx, n, low=0, high=1)
    scene = 1.5 * ctx.randn(n, 3)
    shell = _unit(ctx.randn(n, 3)) * _uniform(ctx, n, 1, low=10, high=14)
    cam = torch.randint(len(view), (n,), generator=ctx.gen(), device=ctx.device)
    depth = _uniform(ctx, n, low=0.05, high=0.6)
    # Within the visible margin: |u - cx| < (1/2 + MARGIN)·width, same for v.
    reach = (0.5 + MARGIN) * torch.tensor(size, device=ctx.device) / intrinsics[cam, :2]
    lateral = _uniform(ctx, n, 2, low=-1, high=1) * reach * depth[:, None]
    local = torch.cat([lateral, depth[:, None]], dim=1) - view[cam, :3, 3]
    floater = (view[cam, :3, :3].transpose(1, 2) @ local[:, :, None])[..., 0]
    points = torch.where((kind < 0.15)[:, None], shell, scene)
    return torch.where((kind < 0.05)[:, None], floater, points)


def _unsafe(points, cov, cams, width: int, height: int) -> torch.Tensor:
    """[G] bool: in some camera, the Gaussian lies within a gap of a visibility bound, or
    it is visible with a footprint wider than FOOTPRINT. In float64, one camera at a time
    (few bytes per Gaussian)."""
    unsafe = torch.zeros(len(points), dtype=torch.bool, device=points.device)
    for cam in cams.double():
        fields = [f[0] for f in _raw(points.double(), cov, cam[None])]
        z = fields[5]
        unsafe |= (z - NEAR).abs() < DEPTH_GAP
        for field, bound in _bounds(width, height):
            unsafe |= (z > NEAR) & ((fields[field] - bound).abs() < PIXEL_GAP)
        too_wide = torch.maximum(fields[2], fields[4]) > FOOTPRINT**2
        unsafe |= _visible(fields, width, height) & too_wide
    return unsafe


def _camera_counts(case: Case, ctx: InputContext) -> list[int]:
    """Cameras per rank: each camera's owner uniform over the ranks that own cameras."""
    takers = [r for r in range(ctx.world_size) if r != case.params.get("empty_rank", -1)]
    picks = ctx.randint(0, len(takers), case.params["cameras"], shared=True)
    counts = torch.bincount(picks, minlength=len(takers)).tolist()
    per_rank = [0] * ctx.world_size
    for taker, count in zip(takers, counts, strict=True):
        per_rank[taker] = count
    return per_rank


def make_inputs(case: Case, ctx: InputContext) -> dict:
    p = case.params
    width, height = p["width"], p["height"]
    counts = _camera_counts(case, ctx)
    view, intrinsics = _cameras(ctx, p["cameras"], width, height)
    mean = p["gaussians"] // ctx.world_size
    n = int(ctx.randint(mean - mean // 2, mean + mean // 2 + 1, 1).item())
    log_scales, quats = ctx.randn(n, 3) * 0.5 - 4.0, ctx.randn(n, 4)
    cov = _covariance(log_scales.double(), quats.double())
    cams = torch.cat([view.reshape(-1, 16), intrinsics], dim=1)
    points = _points(ctx, n, view, intrinsics, (width, height))
    for _ in range(100):
        # Unsafe Gaussians move elsewhere (a fresh draw of the same mixture).
        redo = _unsafe(points, cov, cams, width, height)
        if not redo.any():
            break
        points[redo] = _points(ctx, n, view, intrinsics, (width, height))[redo]
    else:
        raise RuntimeError("could not keep the Gaussians off the visibility bounds")
    first = sum(counts[: ctx.rank])
    mine = slice(first, first + counts[ctx.rank])
    return {
        "means": points,
        "log_scales": log_scales,
        "quats": quats,
        "viewmats": view[mine],
        "intrinsics": intrinsics[mine],
        "width": width,
        "height": height,
    }


def bytes_moved(case: Case, world_size: int) -> int:
    # Expected value: a rank holds G/W Gaussians on average and sends their projections
    # into the cameras of the other ranks, C·(W-1)/W of them on average whatever the
    # split (the counts sum to C): 6 float32 values and a 1-byte flag per pair. The
    # cameras themselves (80 bytes each) are gathered too.
    p = case.params
    pairs = p["cameras"] * (world_size - 1) / world_size * p["gaussians"] / world_size
    cameras = (world_size - 1) * p["cameras"] / world_size * 80
    return max(1, round(pairs * (6 * 4 + 1) + cameras))


PROBLEM = Problem(
    slug="geo-gaussian-splat-projection",
    title="Gaussian-splatting projection with gathered cameras",
    category=Category.GEOMETRIC,
    description=(
        "The projection step of distributed 3-D Gaussian-splatting training (Grendel and "
        "gsplat's distributed mode): Gaussians are sharded over ranks, cameras are too, "
        "and every Gaussian must be projected into every camera and delivered to the "
        "camera's rank. Rank r holds G_r Gaussians (ragged; global ids in rank order, "
        "G = Σ G_r): `means` `[G_r, 3]`, `log_scales` `[G_r, 3]`, `quats` `[G_r, 4]` "
        "(w, x, y, z, not normalised), and its C_r cameras (ragged, 0 on some rank in "
        "some cases; global camera order is rank order): `viewmats` `[C_r, 4, 4]` "
        "(world to camera: p = R·m + t from the top 3×4 block; x right, y down, z "
        "forward) and `intrinsics` `[C_r, 4]` (fx, fy, cx, cy), all float32, plus the "
        "ints `width` and `height` (pixels, shared by all cameras). For a Gaussian "
        "m, s = exp(log_scales), R_q the rotation of q/|q|, Σ = R_q·diag(s²)·R_qᵀ, and a "
        "camera (R, t, fx, fy, cx, cy): p = (x, y, z) = R·m + t, depth = z, "
        "`u = fx·x/z + cx`, `v = fy·y/z + cy`, `J = [[fx/z, 0, −fx·x/z²], "
        "[0, fy/z, −fy·y/z²]]` (no clamping), `cov = J·R·Σ·Rᵀ·Jᵀ + 0.3·I` (the EWA "
        "splat with 3DGS's 0.3 px² dilation), and `visible = z > 0.2 and −0.15·width < "
        "u < 1.15·width and −0.15·height < v < 1.15·height`. Rank r returns, for its own "
        "cameras (in its order) and all G Gaussians (in global id order): `means2d` "
        "`[C_r, G, 2]` (u, v), `cov2d` `[C_r, G, 3]` (cov_xx, cov_xy, cov_yy), `depth` "
        "`[C_r, G]` float32, and `visible` `[C_r, G]` bool; means2d and cov2d are 0 "
        "where not visible, depth never is. Arithmetic is float32 (no TF32). No pair "
        "lies within 1e-3 of the near plane or within 0.05 px of a margin bound, and no "
        "visible footprint has a variance above 256² px² (the inputs are drawn so, "
        "checked in float64), so the flags are exact for any float32 formulation; they "
        "are compared exactly.\n\n"
        "The reference all-gathers every rank's (camera, Gaussian) counts (one host "
        "sync), then the cameras (padded to the longest list), projects its Gaussians "
        "into all C cameras (`[C, G_r, 7]` float32: 6 values and the flag), and sends "
        "camera c's rows to c's owner in one ragged `all_to_all_single`; the pieces "
        "from the ranks in order are the Gaussians in id order. The exchange dominates: "
        "each rank sends ~(W−1)/W of its C·G_r projections, 25 bytes each at the least. "
        "A kernel can write each projected tile straight into the owner's symmetric "
        "output at its Gaussian offset, pack the flag into the data, and overlap the "
        "projection of the next camera with the transfer of the last."
    ),
    reference=solution,
    make_inputs=make_inputs,
    bytes_moved=bytes_moved,
    # float32 rounds p = R·m + t with terms of ~10 units, so u and v err by up to
    # fx·eps·10/z ~ 3e-3 px near the near plane; cov_xy, a difference of products of the
    # size of cov_xx and cov_yy (at most 256² px² here), errs by ~3·eps·65536 ~ 1e-2 px²
    # where it nearly cancels. Measured over 4.8M pairs of a 1920x1080 scene against
    # float64: 2.6e-3 px (u, v), 2.4e-3 px² beyond rtol 1e-4 (cov_xy), 2e-6 (depth). A
    # wrong camera, a missed term of J or a misplaced Gaussian is off by pixels.
    tolerances={"float32": Tolerance(atol=5e-2, rtol=1e-4)},
    dev_cases=(
        Case("dev-fp32", "float32", {"gaussians": 400, "cameras": 6, "width": 64, "height": 48}),
        Case(
            "dev-empty-rank",
            "float32",
            {"gaussians": 240, "cameras": 3, "width": 40, "height": 40, "empty_rank": 1},
        ),
        Case(
            "dev-one-camera", "float32", {"gaussians": 160, "cameras": 1, "width": 32, "height": 24}
        ),
    ),
    eval_cases=(
        Case(
            "demo-1m-16cams",
            "float32",
            {"gaussians": 1 << 20, "cameras": 16, "width": 1920, "height": 1080},
        ),
        Case(
            "demo-4m-8cams-empty-rank",
            "float32",
            {
                "gaussians": 1 << 22,
                "cameras": 8,
                "width": 1920,
                "height": 1080,
                "empty_rank": 1,
            },
        ),
    ),
)
