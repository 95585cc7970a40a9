"""Tensor-parallel layer references, run over gloo by real rank processes, against plain math.

The expected outputs are computed in one process from every rank's inputs, in float64 where
the problem allows, without torch.distributed and without the references' code: the full
activation is reassembled, the layer applied to it whole, and the result cut back into
ranks. FP8 quantization is re-derived from the e4m3 number grid, not from torch's cast.
"""

from __future__ import annotations

import pytest
import torch

from problems import all_problems, get_problem
from tests.problems.harness import WORLD_SIZES, Inputs, check_against, run_references


def _cat(inputs: Inputs, key: str, dim: int) -> torch.Tensor:
    return torch.cat([i[key].double() for i in inputs], dim=dim)


def _rmsnorm(inputs: Inputs, w: int) -> list[torch.Tensor]:
    x, gain = _cat(inputs, "x", 1), _cat(inputs, "weight", 0)
    y = x / torch.sqrt((x * x).mean(dim=1, keepdim=True) + 1e-6) * gain
    return list(y.chunk(w, dim=1))


def _layernorm(inputs: Inputs, w: int) -> list[torch.Tensor]:
    x, gain, bias = _cat(inputs, "x", 1), _cat(inputs, "weight", 0), _cat(inputs, "bias", 0)
    centred = x - x.mean(dim=1, keepdim=True)
    y = centred / torch.sqrt((centred * centred).mean(dim=1, keepdim=True) + 1e-5)
    return list((y * gain + bias).chunk(w, dim=1))


def _rotary(inputs: Inputs, w: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    positions = inputs[0]["positions"].double()
    head_dim = inputs[0]["q"].shape[-1]
    half = head_dim // 2
    freq = 10000.0 ** (-2 * torch.arange(half, dtype=torch.float64) / head_dim)
    turn = torch.polar(
        torch.ones(len(positions), half, dtype=torch.float64), positions[:, None] * freq
    )[:, None, :]

    def rotate(t: torch.Tensor) -> torch.Tensor:
        # Element i and i + D/2 as the real and imaginary parts of one complex number.
        z = torch.complex(t[..., :half], t[..., half:]) * turn
        return torch.cat([z.real, z.imag], dim=-1)

    q, k = rotate(_cat(inputs, "q", 1)), rotate(_cat(inputs, "k", 1))
    return [(q, k)] * w


def _round_to_e4m3(v: torch.Tensor) -> torch.Tensor:
    """Nearest value (ties to even) on the float8 e4m3fn grid, saturating at ±448."""
    a = v.double().abs().clamp(max=448.0)
    # 3 mantissa bits: spacing 2^(e-3) in the binade [2^e, 2^(e+1)), e >= -6; below 2^-6
    # the subnormals are spaced 2^-9.
    exponent = torch.frexp(a).exponent - 1
    spacing = torch.exp2((exponent.clamp(min=-6) - 3).double())
    return torch.sign(v.double()) * torch.round(a / spacing) * spacing


def _fp8_round_trip(x: torch.Tensor) -> torch.Tensor:
    """x quantized in blocks of 128 and dequantized, in float32, as the problems specify."""
    blocks = x.float().reshape(-1, 128)
    amax = blocks.abs().max(dim=1, keepdim=True).values
    scale = torch.where(amax > 0, amax / 448.0, 1.0).float()
    codes = _round_to_e4m3(blocks / scale).float()
    return (codes * scale).reshape(-1)


def _fp8_allgather(inputs: Inputs, w: int) -> list[torch.Tensor]:
    dtype = inputs[0]["x"].dtype
    return [torch.cat([_fp8_round_trip(i["x"]).to(dtype) for i in inputs])] * w


def _fp8_reducescatter(inputs: Inputs, w: int) -> list[torch.Tensor]:
    total = sum(_fp8_round_trip(i["x"]).double() for i in inputs)
    return list(total.chunk(w))


def _gemv(inputs: Inputs, w: int) -> list[torch.Tensor]:
    return [inputs[0]["x"].double() @ _cat(inputs, "weight", 1)] * w


def _conv3d(inputs: Inputs, w: int) -> list[torch.Tensor]:
    x, weight, bias = inputs[0]["x"].double(), _cat(inputs, "weight", 0), _cat(inputs, "bias", 0)
    depth, height, width = x.shape[2:]
    padded = torch.nn.functional.pad(x, (1, 1, 1, 1, 1, 1))
    out = bias[None, :, None, None, None].expand(x.shape[0], -1, depth, height, width).clone()
    for kd in range(3):
        for kh in range(3):
            for kw in range(3):
                window = padded[:, :, kd : kd + depth, kh : kh + height, kw : kw + width]
                out += torch.einsum("ncdhw,oc->nodhw", window, weight[:, :, kd, kh, kw])
    return [out] * w


def _muon(inputs: Inputs, w: int) -> list[torch.Tensor]:
    x = _cat(inputs, "g", 0)
    x = x / (torch.linalg.matrix_norm(x) + 1e-7)
    tall = x.shape[0] > x.shape[1]
    if tall:
        x = x.T
    for _ in range(5):
        gram = x @ x.T
        x = 3.4445 * x + (-4.7750 * gram + 2.0315 * gram @ gram) @ x
    return list((x.T if tall else x).chunk(w, dim=0))


EXPECTED = {
    "tp-rmsnorm": _rmsnorm,
    "tp-layernorm": _layernorm,
    "tp-rotary-gather-heads": _rotary,
    "tp-fp8-allgather": _fp8_allgather,
    "tp-fp8-reducescatter": _fp8_reducescatter,
    "tp-decode-gemv-gather": _gemv,
    "tp-conv3d": _conv3d,
    "tp-muon-newton-schulz": _muon,
}


@pytest.fixture(scope="module", params=WORLD_SIZES, ids=lambda w: f"world{w}")
def reference_outputs(request, tmp_path_factory):
    """Every problem here at one world size, in one process group: {(slug, case): [per rank]}."""
    world_size = request.param
    return world_size, run_references(sorted(EXPECTED), world_size, tmp_path_factory.mktemp("rdv"))


def test_every_layer_problem_is_in_the_catalog():
    tensor_slugs = {p.slug for p in all_problems() if p.category == "tensor"}
    assert set(EXPECTED) <= tensor_slugs
    assert all(get_problem(slug).category == "tensor" for slug in EXPECTED)


@pytest.mark.parametrize("slug", sorted(EXPECTED))
def test_reference_matches_single_process_math(reference_outputs, slug):
    world_size, outputs = reference_outputs
    check_against(slug, world_size, outputs, EXPECTED[slug])


@pytest.mark.parametrize("slug", sorted(EXPECTED))
def test_outputs_keep_the_input_dtype(reference_outputs, slug):
    world_size, outputs = reference_outputs
    for case in get_problem(slug).dev_cases:
        for per_rank in outputs[(slug, case.name)]:
            for out in per_rank if isinstance(per_rank, tuple) else (per_rank,):
                assert out.dtype == getattr(torch, case.dtype), (slug, case.name)
