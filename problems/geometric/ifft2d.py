from __future__ import annotations

import torch

from problems.geometric._fft import FFT, complex_normal, transpose_bytes
from problems.geometric._grid import transpose_blocks
from problems.spec import Case, Category, InputContext, Problem


def solution(spec: torch.Tensor) -> torch.Tensor:
    # Columns (N0 wavenumbers) are whole on this rank: invert them, transpose the slabs
    # back to rows, invert those. Each 1-D pass divides by its length.
    columns = torch.fft.ifft(spec, dim=1)
    rows = transpose_blocks(columns)  # [N0/W, N1]
    return torch.fft.ifft(rows, dim=1)


def make_inputs(case: Case, ctx: InputContext) -> dict:
    # The spectrum of a unit-scale field as an unnormalised forward FFT makes it
    # (E|F|² = N0·N1), so the field that comes back has unit scale.
    p = case.params
    scale = (p["n0"] * p["n1"]) ** 0.5
    return {"spec": complex_normal(ctx, p["n1"] // ctx.world_size, p["n0"], scale=scale)}


PROBLEM = Problem(
    slug="geo-ifft2d",
    title="Distributed inverse 2-D FFT from the transposed layout",
    category=Category.GEOMETRIC,
    description=(
        "The inverse of the slab-decomposed 2-D FFT (heFFTe, cuFFTMp; the way back to "
        "physical space in spectral solvers and FNO-style Fourier layers): the spectrum "
        "`F` `[N0, N1]` (wavenumbers k0, k1) is held in the transposed layout that the "
        "forward slab FFT leaves: rank r holds column block r as `spec` `[N1/W, N0]` "
        "complex64 with `spec[j, k0] = F[k0, r·N1/W + j]`, with the scale of an "
        "unnormalised forward transform of a unit field (E|F|² = N0·N1). Rank r returns "
        "rows `[r·N0/W, (r+1)·N0/W)` of the field as `x` `[N0/W, N1]` complex64, where "
        "`x[n0, n1] = (N0·N1)^-1 · Σ_{k0,k1} F[k0, k1] · exp(+2πi(k0·n0/N0 + k1·n1/N1))`: "
        "`torch.fft.ifft2(F)` with its default ('backward') normalisation. Arithmetic is "
        "float32 complex (no half precision, no TF32); N0 and N1 are multiples of W and "
        "need not be powers of two.\n\n"
        "The reference runs the 1-D inverse FFTs along its whole N0-long rows of `spec`, "
        "then the slab transpose back: block j of those rows' columns (field rows "
        "`[j·N0/W, (j+1)·N0/W)`), transposed to `[N0/W, N1/W]`, goes to rank j in one "
        "`all_to_all_single`; the received blocks side by side give whole field rows, "
        "which a last batch of 1-D inverse FFTs finishes. Each rank sends (W−1)/W of its "
        "slab. A kernel can overlap the transpose with both FFT passes through symmetric "
        "buffers, fuse the local transposes into the FFT's loads and stores, and fold the "
        "1/(N0·N1) scaling into the last pass."
    ),
    reference=solution,
    make_inputs=make_inputs,
    bytes_moved=transpose_bytes,
    tolerances=FFT,
    dev_cases=(
        Case("dev-fp32", "float32", {"n0": 32, "n1": 64}),
        # Not powers of two (radix-3 and radix-5 passes), and N0 > N1.
        Case("dev-mixed-radix", "float32", {"n0": 48, "n1": 40}),
    ),
    eval_cases=(
        Case("demo-4k", "float32", {"n0": 4096, "n1": 4096}),
        Case("demo-8k", "float32", {"n0": 8192, "n1": 8192}),
    ),
)
