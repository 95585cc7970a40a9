from __future__ import annotations

import torch

from problems.geometric._fft import FFT, complex_normal, transpose_bytes
from problems.geometric._grid import transpose_blocks
from problems.spec import Case, Category, InputContext, Problem


def solution(x: torch.Tensor) -> torch.Tensor:
    # Rows are whole on this rank: transform them, transpose the slabs so that columns
    # are whole, transform those. Each 1-D pass scales by 1/sqrt(its length).
    rows = torch.fft.fft(x, dim=1, norm="ortho")
    columns = transpose_blocks(rows)  # [N1/W, N0]
    return torch.fft.fft(columns, dim=1, norm="ortho")


def make_inputs(case: Case, ctx: InputContext) -> dict:
    p = case.params
    return {"x": complex_normal(ctx, p["n0"] // ctx.world_size, p["n1"])}


PROBLEM = Problem(
    slug="geo-fft2d",
    title="Distributed 2-D FFT with a slab transpose",
    category=Category.GEOMETRIC,
    description=(
        "The forward 2-D FFT of a field too large for one GPU, split in slabs as heFFTe, "
        "cuFFTMp and the spectral solvers of turbulence and phase-field codes (and the "
        "Fourier layers of FNO-style models) split it. The complex field `x` is "
        "`[N0, N1]`; rank r holds its rows `[r·N0/W, (r+1)·N0/W)` as `x` "
        "`[N0/W, N1]` (complex64, E|x|² = 1). Rank r returns column block r of the "
        "spectrum in transposed layout: `X` `[N1/W, N0]` complex64 with "
        "`X[j, k0] = F[k0, r·N1/W + j]`, where "
        "`F[k0, k1] = (N0·N1)^-1/2 · Σ_{n0,n1} x[n0, n1] · exp(−2πi(k0·n0/N0 + k1·n1/N1))` "
        "is `torch.fft.fft2(x, norm='ortho')` of the whole field (the unitary scaling, "
        "heFFTe's symmetric one, keeps the spectrum at the field's unit scale). Arithmetic "
        "is float32 complex (no half precision, no TF32); N0 and N1 are multiples of W "
        "and need not be powers of two.\n\n"
        "The reference runs the 1-D FFTs along its whole rows (`torch.fft.fft`, cuFFT on "
        "GPUs), then the slab transpose: block j of its columns, transposed to "
        "`[N1/W, N0/W]`, goes to rank j in one `all_to_all_single`, and the received "
        "blocks side by side give whole columns; a last batch of 1-D FFTs along them "
        "finishes the transform. Each rank sends (W−1)/W of its slab; the transposed "
        "output layout saves the transpose back, as the libraries' 'transposed' output "
        "options do. A kernel can overlap the transpose with both FFT passes: write each "
        "column block into its owner's symmetric buffer as soon as the row FFTs that "
        "produce it finish, and start the column FFTs of the blocks that have arrived, "
        "fusing the local transposes into the FFT's loads and stores."
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
