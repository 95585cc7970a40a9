"""Inputs, byte model and tolerance shared by the distributed 2-D FFT problems.

Not a problem module (it defines no PROBLEM); the registry skips it.
"""

from __future__ import annotations

import torch

from problems.spec import Case, InputContext, Tolerance


def complex_normal(ctx: InputContext, *shape: int, scale: float = 1.0) -> torch.Tensor:
    """complex64 entries with independent N(0, scale²/2) real and imaginary parts:
    E|z|² = scale²."""
    re, im = ctx.randn(*shape, dtype=torch.float32), ctx.randn(*shape, dtype=torch.float32)
    return torch.complex(re, im) * (scale * 0.5**0.5)


def transpose_bytes(case: Case, world_size: int) -> int:
    # The slab transpose: a rank keeps 1/W of its N0·N1/W complex64 values and sends the
    # rest, (W-1)/W² of the field. The 1-D FFTs need nothing from anyone.
    p = case.params
    return (world_size - 1) * (p["n0"] // world_size) * (p["n1"] // world_size) * 8


# Outputs have unit scale (E|X|² = 1) in both problems. A float32 FFT of length N errs by
# ~eps·log2(N) relative in the rms (eps = 2^-24): for the 2-D transform of 8192² points,
# log2 N = 26 and the rms error is ~2e-6 even with twiddles that are only float32-exact,
# and the largest of 6.7e7 elements ~5x that. pocketfft (the CPU) measures 1.3e-7 rms
# and 8.6e-7 max at 4096². 1e-4 leaves a tenfold margin over a careless float32 FFT,
# while a wrong twiddle, a misplaced block or a missing normalisation is off by O(1).
FFT: dict[str, Tolerance] = {"float32": Tolerance(atol=1e-4, rtol=1e-4)}
