"""Geometric references over gloo ranks, against single-process float64 math.

The math reassembles the whole field, volume, sphere, image or scene from every rank's
inputs and works the plain way: DFT matrices instead of FFTs, a convolution for the
stencil, 27 shifted products for the 3-D convolution, a circulant matrix for the zonal
filter, torch's conv2d / instance_norm / interpolate for the decoder with a normalised
weighted average for the blend, Hamilton products and full Jacobians for the splats. It
shares no code with the references, so a wrong reference fails here.
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from problems import all_problems, get_problem
from tests.problems.harness import (
    WORLD_SIZES,
    Expected,
    Inputs,
    check_against,
    rank_inputs,
    run_references,
)

# The process grids the descriptions state: (rows, cols) for the stencil, (polar,
# azimuth) for the sphere.
STENCIL_GRID = {2: (2, 1), 4: (2, 2), 8: (4, 2)}
SPHERE_GRID = {2: (1, 2), 4: (2, 2), 8: (2, 4)}


def _dft(n: int, sign: int) -> torch.Tensor:
    """[n, n] complex128 exp(sign·2πi·j·k/n), the angle reduced mod n first."""
    k = torch.arange(n, dtype=torch.float64)
    angle = sign * 2 * math.pi * (torch.outer(k, k) % n) / n
    return torch.polar(torch.ones_like(angle), angle)


def fft2d(inputs: Inputs, w: int) -> list[torch.Tensor]:
    x = torch.cat([i["x"] for i in inputs]).to(torch.complex128)
    n0, n1 = x.shape
    spectrum = _dft(n0, -1) @ x @ _dft(n1, -1) / math.sqrt(n0 * n1)
    return [block.T for block in spectrum.chunk(w, dim=1)]


def ifft2d(inputs: Inputs, w: int) -> list[torch.Tensor]:
    spectrum = torch.cat([i["spec"] for i in inputs]).to(torch.complex128).T  # [N0, N1]
    n0, n1 = spectrum.shape
    field = _dft(n0, 1) @ spectrum @ _dft(n1, 1) / (n0 * n1)
    return list(field.chunk(w, dim=0))


def _from_grid(blocks: list[torch.Tensor], cols: int) -> torch.Tensor:
    rows = [torch.cat(blocks[r : r + cols], dim=-1) for r in range(0, len(blocks), cols)]
    return torch.cat(rows, dim=-2)


def _to_grid(full: torch.Tensor, rows: int, cols: int) -> list[torch.Tensor]:
    return [tile for band in full.chunk(rows, dim=-2) for tile in band.chunk(cols, dim=-1)]


def halo_stencil_2d(inputs: Inputs, w: int) -> list[torch.Tensor]:
    rows, cols = STENCIL_GRID[w]
    u = _from_grid([i["u"].double() for i in inputs], cols)
    f = _from_grid([i["f"].double() for i in inputs], cols)
    cross = torch.tensor([[0.0, 1.0, 0.0], [1.0, 0.0, 1.0], [0.0, 1.0, 0.0]], dtype=torch.float64)
    for _ in range(inputs[0]["steps"]):
        neighbours = F.conv2d(F.pad(u, (1, 1, 1, 1))[None, None], cross[None, None])[0, 0]
        u = (neighbours + f) / 4
    return _to_grid(u, rows, cols)


def halo_conv3d(inputs: Inputs, w: int) -> list[torch.Tensor]:
    x = torch.cat([i["x"].double() for i in inputs], dim=1)
    weight, bias = inputs[0]["weight"].double(), inputs[0]["bias"].double()
    _, depth, height, width = x.shape
    padded = F.pad(x, (1, 1, 1, 1, 1, 1))
    y = bias[:, None, None, None].expand(-1, depth, height, width)
    for i in range(3):
        for j in range(3):
            for k in range(3):
                window = padded[:, i : i + depth, j : j + height, k : k + width]
                y = y + torch.einsum("oc,cdhw->odhw", weight[:, :, i, j, k], window)
    return list(y.chunk(w, dim=1))


def _latitude_sizes(n_lat: int, polar: int) -> list[int]:
    return [n_lat // polar + (p < n_lat % polar) for p in range(polar)]


def spherical_conv(inputs: Inputs, w: int) -> list[torch.Tensor]:
    polar, azimuth = SPHERE_GRID[w]
    x = _from_grid([i["x"].double() for i in inputs], azimuth)  # [C, NLAT, NLON]
    weight = inputs[0]["zonal_weight"].to(torch.complex128)
    taps = inputs[0]["polar_weight"].double()
    channels, n_lat, n = x.shape
    # The zonal filter as a circular convolution with the kernel the kept modes make.
    m = torch.arange(1, weight.shape[1], dtype=torch.float64)
    phase = torch.polar(
        torch.ones(n, len(m), dtype=torch.float64),
        2 * math.pi * (torch.outer(torch.arange(n, dtype=torch.float64), m) % n) / n,
    )
    kernel = (weight[:, :1].real + 2 * (weight[:, 1:] @ phase.T).real) / n  # [C, N]
    lag = (torch.arange(n)[:, None] - torch.arange(n)[None, :]) % n
    y = torch.einsum("cnj,cij->cin", kernel[:, lag], x)
    # The polar filter, zeros beyond the poles.
    halo = taps.shape[1] // 2
    padded = F.pad(y, (0, 0, halo, halo))
    z = sum(taps[:, t, None, None] * padded[:, t : t + n_lat] for t in range(taps.shape[1]))
    bands = z.split(_latitude_sizes(n_lat, polar), dim=1)
    return [seg for band in bands for seg in band.chunk(azimuth, dim=2)]


def _blend_axis(length: int, index: int, count: int, ramp: int) -> torch.Tensor:
    weight = torch.ones(length, dtype=torch.float64)
    for k in range(ramp):
        if index > 0:
            weight[k] = (k + 0.5) / ramp
        if index < count - 1:
            weight[length - 1 - k] = (k + 0.5) / ramp
    return weight


def tiled_decode_blend(inputs: Inputs, w: int) -> list[torch.Tensor]:
    first = inputs[0]
    height, width, overlap = first["height"], first["width"], first["overlap"]
    tile = first["tiles"].shape[-1]
    stride = tile - overlap
    rows, cols = (height - tile) // stride + 1, (width - tile) // stride + 1
    latent = torch.zeros(first["tiles"].shape[1], height, width, dtype=torch.float64)
    for i in inputs:
        for t, z in zip(i["tile_ids"].tolist(), i["tiles"].double(), strict=True):
            ty, tx = divmod(t, cols)
            latent[:, ty * stride : ty * stride + tile, tx * stride : tx * stride + tile] = z
    w1, b1 = first["w1"].double(), first["b1"].double()
    w2, b2 = first["w2"].double(), first["b2"].double()
    total = torch.zeros(3, 2 * height, 2 * width, dtype=torch.float64)
    weights = torch.zeros(2 * height, 2 * width, dtype=torch.float64)
    for ty in range(rows):
        for tx in range(cols):
            z = latent[:, ty * stride : ty * stride + tile, tx * stride : tx * stride + tile]
            a = F.conv2d(z[None], w1[:, :, None, None], b1)
            a = F.silu(F.instance_norm(a, eps=1e-5))
            pixels = F.conv2d(F.interpolate(a, scale_factor=2, mode="nearest"), w2, b2, padding=1)
            blend = torch.outer(
                _blend_axis(2 * tile, ty, rows, 2 * overlap),
                _blend_axis(2 * tile, tx, cols, 2 * overlap),
            )
            where = (slice(2 * ty * stride, 2 * (ty * stride + tile)),)
            where += (slice(2 * tx * stride, 2 * (tx * stride + tile)),)
            total[(slice(None), *where)] += pixels[0] * blend
            weights[where] += blend
    return list((total / weights).chunk(w, dim=1))


def _hamilton(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    pw, px, py, pz = p.unbind(-1)
    qw, qx, qy, qz = q.unbind(-1)
    return torch.stack(
        [
            pw * qw - px * qx - py * qy - pz * qz,
            pw * qx + px * qw + py * qz - pz * qy,
            pw * qy - px * qz + py * qw + pz * qx,
            pw * qz + px * qy - py * qx + pz * qw,
        ],
        dim=-1,
    )


def _rotations(quats: torch.Tensor) -> torch.Tensor:
    """Column k of R is q·e_k·q* for the unit quaternion q."""
    q = quats / quats.norm(dim=1, keepdim=True)
    conj = q * torch.tensor([1.0, -1.0, -1.0, -1.0], dtype=q.dtype)
    basis = torch.eye(3, dtype=q.dtype)
    columns = []
    for k in range(3):
        e = torch.cat([torch.zeros(1, dtype=q.dtype), basis[k]]).expand(len(q), 4)
        columns.append(_hamilton(_hamilton(q, e), conj)[:, 1:])
    return torch.stack(columns, dim=2)


def _splats(inputs: Inputs) -> tuple[torch.Tensor, ...]:
    """Every camera (global order) x every Gaussian: u, v, cov [.., 2, 2], depth, flag."""
    means = torch.cat([i["means"] for i in inputs]).double()
    scales = torch.cat([i["log_scales"] for i in inputs]).double().exp()
    rot = _rotations(torch.cat([i["quats"] for i in inputs]).double())
    sigma = rot @ torch.diag_embed(scales**2) @ rot.transpose(1, 2)
    view = torch.cat([i["viewmats"] for i in inputs]).double()
    fx, fy, cx, cy = torch.cat([i["intrinsics"] for i in inputs]).double().T[..., None]
    width, height = inputs[0]["width"], inputs[0]["height"]
    p = (view[:, None, :3, :3] @ means[None, :, :, None])[..., 0] + view[:, None, :3, 3]
    x, y, z = p.unbind(-1)
    u, v = fx * x / z + cx, fy * y / z + cy
    jac = torch.zeros(*z.shape, 2, 3, dtype=torch.float64)
    jac[..., 0, 0], jac[..., 0, 2] = fx / z, -fx * x / z**2
    jac[..., 1, 1], jac[..., 1, 2] = fy / z, -fy * y / z**2
    t = jac @ view[:, None, :3, :3]
    cov = t @ sigma[None] @ t.transpose(-1, -2) + 0.3 * torch.eye(2, dtype=torch.float64)
    visible = (z > 0.2) & (u > -0.15 * width) & (u < 1.15 * width)
    visible &= (v > -0.15 * height) & (v < 1.15 * height)
    return u, v, cov, z, visible


def gaussian_splat_projection(inputs: Inputs, w: int) -> list[tuple[torch.Tensor, ...]]:
    u, v, cov, z, visible = _splats(inputs)
    keep = visible[..., None]
    means2d = torch.stack([u, v], dim=-1) * keep
    cov2d = torch.stack([cov[..., 0, 0], cov[..., 0, 1], cov[..., 1, 1]], dim=-1) * keep
    counts = [len(i["viewmats"]) for i in inputs]
    return [
        tuple(t[sum(counts[:r]) : sum(counts[: r + 1])] for t in (means2d, cov2d, z, visible))
        for r in range(w)
    ]


EXPECTED: dict[str, Expected] = {
    "geo-fft2d": fft2d,
    "geo-ifft2d": ifft2d,
    "geo-halo-stencil-2d": halo_stencil_2d,
    "geo-halo-conv3d": halo_conv3d,
    "geo-spherical-conv": spherical_conv,
    "geo-tiled-decode-blend": tiled_decode_blend,
    "geo-gaussian-splat-projection": gaussian_splat_projection,
}


@pytest.fixture(scope="module", params=WORLD_SIZES, ids=lambda w: f"world{w}")
def reference_outputs(request, tmp_path_factory):
    world_size = request.param
    return world_size, run_references(sorted(EXPECTED), world_size, tmp_path_factory.mktemp("rdv"))


def _real(value):
    """Complex outputs as (re, im) float pairs: the harness compares floats, and so does
    the evaluator (compare.py views complex tensors as real)."""
    if isinstance(value, (tuple, list)):
        return type(value)(_real(v) for v in value)
    return torch.view_as_real(value) if value.is_complex() else value


def test_every_problem_here_is_in_the_catalog():
    geometric = {p.slug for p in all_problems() if p.category == "geometric"}
    assert set(EXPECTED) == geometric
    assert all(slug.startswith("geo-") for slug in geometric)


@pytest.mark.parametrize("slug", sorted(EXPECTED))
def test_reference_matches_single_process_math(reference_outputs, slug):
    world_size, outputs = reference_outputs
    real = {key: [_real(v) for v in per_rank] for key, per_rank in outputs.items()}
    check_against(slug, world_size, real, lambda inputs, w: _real(EXPECTED[slug](inputs, w)))


# The cases' shapes are valid at every supported world size: pure arithmetic on the params.


def _all_cases(slug: str):
    problem = get_problem(slug)
    for case in (*problem.dev_cases, *problem.eval_cases):
        for w in problem.world_sizes:
            yield case.params, w


def test_grids_and_slabs_divide_evenly():
    for slug in ("geo-fft2d", "geo-ifft2d"):
        for p, w in _all_cases(slug):
            assert p["n0"] % w == 0 and p["n1"] % w == 0
    for p, w in _all_cases("geo-halo-stencil-2d"):
        rows, cols = STENCIL_GRID[w]
        assert p["ny"] % rows == 0 and p["nx"] % cols == 0
    for p, w in _all_cases("geo-halo-conv3d"):
        assert p["depth"] % w == 0


def test_sphere_splits_latitudes_unevenly_and_every_block_holds_its_halo():
    for p, w in _all_cases("geo-spherical-conv"):
        polar, azimuth = SPHERE_GRID[w]
        assert p["n_lon"] % azimuth == 0 and p["channels"] % azimuth == 0
        assert p["modes"] <= p["n_lon"] // 2
        assert min(_latitude_sizes(p["n_lat"], polar)) >= p["halo"]
    assert _latitude_sizes(721, 2) == [361, 360]
    blocks = [rank_inputs("geo-spherical-conv", "dev-fp32", r, 4)["x"] for r in range(4)]
    assert [b.shape[1] for b in blocks] == [7, 7, 6, 6]


def test_tiles_cover_the_latent_and_bands_split_the_image():
    for p, w in _all_cases("geo-tiled-decode-blend"):
        stride = p["tile"] - p["overlap"]
        assert 2 * p["overlap"] <= p["tile"]
        assert (p["height"] - p["tile"]) % stride == 0
        assert (p["width"] - p["tile"]) % stride == 0
        assert 2 * p["height"] % w == 0


def _tile_counts(case: str, w: int) -> list[int]:
    return [len(rank_inputs("geo-tiled-decode-blend", case, r, w)["tile_ids"]) for r in range(w)]


@pytest.mark.parametrize("w", [2, 4, 8])
def test_tile_deals_are_ragged_and_leave_ranks_empty(w):
    assert _tile_counts("dev-empty-rank", w)[1] == 0
    assert sum(_tile_counts("dev-empty-rank", w)) == 9
    few = _tile_counts("dev-few-tiles", w)
    assert sum(few) == 3 and max(few) - min(few) == 1
    if w >= 4:
        assert 0 in few
    # Every tile is dealt once.
    ids = [rank_inputs("geo-tiled-decode-blend", "dev-fp32", r, w)["tile_ids"] for r in range(w)]
    assert sorted(torch.cat(ids).tolist()) == list(range(12))


def _splat_inputs(case: str, w: int) -> Inputs:
    return [rank_inputs("geo-gaussian-splat-projection", case, r, w) for r in range(w)]


@pytest.mark.parametrize("w", [2, 4])
def test_cameras_and_gaussians_are_ragged(w):
    empty = _splat_inputs("dev-empty-rank", w)
    assert len(empty[1]["viewmats"]) == 0 and sum(len(i["viewmats"]) for i in empty) == 3
    one = [len(i["viewmats"]) for i in _splat_inputs("dev-one-camera", w)]
    assert sorted(one) == [0] * (w - 1) + [1]
    gaussians = [len(i["means"]) for i in _splat_inputs("dev-fp32", w)]
    assert len(set(gaussians)) > 1


def test_splat_flags_cover_every_rule_and_stay_off_the_bounds():
    inputs = _splat_inputs("dev-fp32", 4)
    u, v, _, z, visible = _splats(inputs)
    width, height = inputs[0]["width"], inputs[0]["height"]
    inside = (u > -0.15 * width) & (u < 1.15 * width) & (v > -0.15 * height)
    inside &= v < 1.15 * height
    assert visible.any() and (~visible).any()
    # Some are culled by the near plane alone: depth in (0, 0.2] within the window.
    assert (inside & (z > 0) & (z <= 0.2)).any()
    assert (z < 0).any() and (~inside & (z > 0.2)).any()
    assert ((z - 0.2).abs() >= 1e-3).all()
    for value, bound in ((u, -0.15 * width), (u, 1.15 * width), (v, -0.15 * height)):
        assert ((value - bound).abs()[z > 0.2] >= 0.05).all()
    assert ((v - 1.15 * height).abs()[z > 0.2] >= 0.05).all()
