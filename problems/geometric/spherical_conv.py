from __future__ import annotations

import torch
import torch.distributed as dist

from problems.geometric._grid import grid_shape, swap
from problems.spec import Case, Category, InputContext, Problem, Tolerance


def sphere_grid(world_size: int) -> tuple[int, int]:
    """(polar, azimuth) process grid: 1 x 2 for W = 2, 2 x 2 for 4, 2 x 4 for 8."""
    rows, cols = grid_shape(world_size)
    return cols, rows


def latitude_range(n_lat: int, polar: int, p: int) -> tuple[int, int]:
    """Rows of polar rank p: as torch.tensor_split, the first n_lat % polar get one more."""
    base, extra = divmod(n_lat, polar)
    start = p * base + min(p, extra)
    return start, start + base + (p < extra)


def _azimuth_all_to_all(send: torch.Tensor, group: list[int]) -> torch.Tensor:
    """Chunk k of `send` ([P, ...]) goes to group[k]; chunk k of the result came from it.

    One all-to-all over the world with empty splits outside the azimuth group, so no
    sub-communicator has to be built.
    """
    splits = [0] * dist.get_world_size()
    for peer in group:
        splits[peer] = send[0].numel()
    recv = torch.empty_like(send)
    dist.all_to_all_single(recv.view(-1), send.contiguous().view(-1), splits, splits)
    return recv


def _zonal_filter(x: torch.Tensor, weight: torch.Tensor, group: list[int]) -> torch.Tensor:
    channels, lat, segment = x.shape
    azimuth, modes = len(group), weight.shape[1]
    block = channels // azimuth
    # Transpose in the azimuth group: channel block k gets every longitude segment.
    ring = _azimuth_all_to_all(x.reshape(azimuth, block, lat, segment), group)
    ring = ring.permute(1, 2, 0, 3).reshape(block, lat, azimuth * segment)
    mine = group.index(dist.get_rank())
    spectrum = torch.fft.rfft(ring, dim=2)[..., :modes]
    spectrum = spectrum * weight[mine * block : (mine + 1) * block, None, :]
    # irfft pads the truncated wavenumbers with zeros.
    filtered = torch.fft.irfft(spectrum, n=azimuth * segment, dim=2)
    # And back: longitude segment k of every channel block returns to group[k].
    back = filtered.reshape(block, lat, azimuth, segment).permute(2, 0, 1, 3)
    return _azimuth_all_to_all(back.contiguous(), group).reshape(channels, lat, segment)


def _polar_filter(
    y: torch.Tensor, taps: torch.Tensor, north: int | None, south: int | None
) -> torch.Tensor:
    halo, lat = taps.shape[1] // 2, y.shape[1]
    # h rows from each polar neighbour; zeros beyond the poles.
    above, below = swap([(y[:, :halo], north), (y[:, -halo:], south)])
    padded = torch.cat([above, y, below], dim=1)
    out = taps[:, 0, None, None] * padded[:, :lat]
    for t in range(1, taps.shape[1]):
        out = out + taps[:, t, None, None] * padded[:, t : t + lat]
    return out


def solution(
    x: torch.Tensor, zonal_weight: torch.Tensor, polar_weight: torch.Tensor
) -> torch.Tensor:
    rank = dist.get_rank()
    polar, azimuth = sphere_grid(dist.get_world_size())
    p = rank // azimuth
    group = [p * azimuth + k for k in range(azimuth)]
    y = _zonal_filter(x, zonal_weight, group)
    north = rank - azimuth if p > 0 else None
    south = rank + azimuth if p + 1 < polar else None
    return _polar_filter(y, polar_weight, north, south)


def make_inputs(case: Case, ctx: InputContext) -> dict:
    p = case.params
    polar, azimuth = sphere_grid(ctx.world_size)
    start, stop = latitude_range(p["n_lat"], polar, ctx.rank // azimuth)
    channels, modes, taps = p["channels"], p["modes"], 2 * p["halo"] + 1
    weight = torch.complex(
        ctx.randn(channels, modes, shared=True), ctx.randn(channels, modes, shared=True)
    )
    # The zonal mean's weight is real, so the filtered field is real without ambiguity.
    weight[:, 0] = weight[:, 0].real * 2**0.5
    return {
        "x": ctx.randn(channels, stop - start, p["n_lon"] // azimuth),
        "zonal_weight": weight * 0.5**0.5,
        "polar_weight": ctx.randn(channels, taps, shared=True) * taps**-0.5,
    }


def bytes_moved(case: Case, world_size: int) -> int:
    # The transpose there and back inside the azimuth group (a rank keeps 1/P_lon of its
    # [C, L, n_lon/P_lon] block each way; L the larger latitude block), then h rows to
    # each polar neighbour. Truncated spectra would not be smaller for P_lon >= 2.
    p = case.params
    polar, azimuth = sphere_grid(world_size)
    lat = -(-p["n_lat"] // polar)
    segment = p["n_lon"] // azimuth
    transpose = 2 * (azimuth - 1) * (p["channels"] // azimuth) * lat * segment
    halo = min(2, polar - 1) * p["halo"] * p["channels"] * segment
    return (transpose + halo) * case.itemsize


PROBLEM = Problem(
    slug="geo-spherical-conv",
    title="Spherical filter with azimuth transposes and polar halos",
    category=Category.GEOMETRIC,
    description=(
        "A separable filter on the sphere with the (polar, azimuth) domain decomposition "
        "of makani and the spatially parallel FourCastNet / SFNO weather models. The "
        "field `[C, NLAT, NLON]` (channels, latitude rows from pole to pole, longitude) "
        "lives on a P_lat × P_lon process grid: 1 × 2 for W = 2, 2 × 2 for W = 4, 2 × 4 "
        "for W = 8; rank r is polar rank p = r // P_lon, azimuth rank q = r % P_lon, and "
        "the azimuth group of r is ranks `p·P_lon … p·P_lon + P_lon − 1`. Latitude rows "
        "split unevenly as `torch.tensor_split` does (NLAT = 721 gives 361 and 360 rows: "
        "the first NLAT % P_lat polar ranks get one more), longitudes evenly. Rank r "
        "holds `x` `[C, L_p, NLON/P_lon]` float32 (its latitude rows, longitudes "
        "`[q·NLON/P_lon, …)`), and every rank holds `zonal_weight` `[C, M]` complex64 "
        "(M ≤ NLON/2, imaginary part 0 at m = 0) and `polar_weight` `[C, 2h+1]` float32; "
        "every L_p ≥ h. Rank r returns `z` `[C, L_p, NLON/P_lon]` float32, its block of "
        "`z = polar(zonal(x))`. The zonal filter works per channel and latitude row on "
        "the whole periodic ring of N = NLON longitudes: with "
        "`X[m] = Σ_n x[n]·exp(−2πi·m·n/N)`, `y[n] = (1/N)·(w[0]·X[0] + "
        "2·Re Σ_{m=1}^{M−1} w[m]·X[m]·exp(+2πi·m·n/N))`, i.e. "
        "`irfft(rfft(x)[:M] · w, n=N)` with the wavenumbers from M on dropped, as the "
        "longitude part of a spectral layer. The polar filter works per channel and "
        "longitude along the latitude rows, not periodic: "
        "`z[c, i, j] = Σ_{t=0}^{2h} polar_weight[c, t] · y[c, i+t−h, j]` with y = 0 for "
        "rows beyond the poles. Both filters are linear and act on different axes, so "
        "they commute; arithmetic is float32.\n\n"
        "The reference transposes within the azimuth group (one `all_to_all_single` over "
        "the world with empty splits outside the group: channel block k of C/P_lon "
        "channels goes to azimuth rank k, which gets whole rings), runs `torch.fft.rfft`, "
        "truncates, multiplies and `irfft`s, transposes back, then swaps h rows with its "
        "polar neighbours (`batch_isend_irecv`, ranks r ± P_lon) and sums the 2h+1 "
        "shifted rows. The two transposes move (P_lon − 1)/P_lon of the block each way; "
        "the polar halos are small. A kernel can pipeline the transpose with the FFTs "
        "by latitude row, fuse the spectral multiply into them, and send the polar halo "
        "rows first so the polar filter's interior runs while they travel."
    ),
    reference=solution,
    make_inputs=make_inputs,
    bytes_moved=bytes_moved,
    # Outputs have scale ~0.7. A float32 real FFT of N = 1440 and its inverse err by
    # ~eps·log2(N) ≈ 1e-6 relative to the ring's rms, the 2h+1 taps add a few roundings;
    # the largest error over tens of millions of outputs stays below 1e-5. A dropped or
    # extra wavenumber, a missing halo row or a wrong pole boundary is off by ~0.1.
    tolerances={"float32": Tolerance(atol=5e-5, rtol=5e-5)},
    dev_cases=(
        Case(
            "dev-fp32",
            "float32",
            {"channels": 8, "n_lat": 13, "n_lon": 32, "modes": 10, "halo": 2},
        ),
        # M = N/2: every wavenumber below Nyquist is kept.
        Case(
            "dev-all-modes",
            "float32",
            {"channels": 4, "n_lat": 9, "n_lon": 24, "modes": 12, "halo": 1},
        ),
    ),
    eval_cases=(
        Case(
            "demo-era5-c64",
            "float32",
            {"channels": 64, "n_lat": 721, "n_lon": 1440, "modes": 360, "halo": 2},
        ),
        Case(
            "demo-era5-c128",
            "float32",
            {"channels": 128, "n_lat": 721, "n_lon": 1440, "modes": 360, "halo": 2},
        ),
    ),
)
