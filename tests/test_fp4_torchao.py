"""The FP4 emulation (runtime/pytorch/fp4.py) against torchao 0.18's own pure-PyTorch FP4 code,
run on CPU (its FP4 paths are tested on CUDA only: an oracle, pinned by the ``fp8`` extra):
its E2M1 cast (``f32_to_f4_unpacked``), its MXFP4 blocks (``to_mx`` with RCEIL, and FLOOR's
clipping) and its NVFP4 blocks (``nvfp4_quantize``), where the two recipes differ where
torchao's code says they do. Skipped without torchao."""
import warnings

import pytest
import torch

from precisionaudit.runtime.pytorch import fp4

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    pytest.importorskip("torchao.prototype.mx_formats.mx_tensor")
from torchao.prototype.mx_formats import mx_tensor  # noqa: E402
from torchao.prototype.mx_formats.config import ScaleCalculationMode  # noqa: E402
from torchao.prototype.mx_formats.kernels import f4_unpacked_to_f32, f32_to_f4_unpacked, unpack_uint4  # noqa: E402
from torchao.prototype.mx_formats.nvfp4_tensor import nvfp4_quantize, per_tensor_amax_to_scale  # noqa: E402

E4M3 = torch.float8_e4m3fn


def _operand(seed, shape=(64, 256), spread=True):
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(seed))
    return x * torch.logspace(-3, 2, shape[-1]) if spread else x


def _fp4_values(packed, shape):
    return f4_unpacked_to_f32(unpack_uint4(packed).reshape(shape))


def test_e2m1_rounding_is_torchaos():
    x = torch.linspace(-8, 8, 100001)
    assert torch.equal(fp4.round_e2m1(x), f4_unpacked_to_f32(f32_to_f4_unpacked(x)))


def test_mxfp4_blocks_are_torchaos_rceil():
    x = _operand(0)
    scale, data = mx_tensor.to_mx(x, torch.float4_e2m1fn_x2, 32, ScaleCalculationMode.RCEIL)
    ours = fp4.mxfp4_quantize(x)
    exponent = scale.view(torch.uint8).to(torch.int32) - 127
    assert torch.equal(ours.scales[:, ::32], (2.0 ** exponent.double()).float().reshape(64, -1))
    assert torch.equal(ours.values, _fp4_values(data, x.shape))


def test_the_floor_rule_clips_the_blocks_torchaos_floor_clips():
    x = _operand(1)
    scale, _ = mx_tensor.to_mx(x, torch.float4_e2m1fn_x2, 32, ScaleCalculationMode.FLOOR)
    decode = (2.0 ** (scale.view(torch.uint8).double() - 127)).reshape(64, -1)
    clipped = x.abs().reshape(64, -1, 32).amax(-1) / decode > 6
    assert torch.equal(fp4.mx_floor_clips(x), clipped)
    assert 0.3 < clipped.float().mean() < 0.5  # mantissa above 1.5: log2(2/1.5) of the blocks


@pytest.mark.parametrize("spread", [False, True])
def test_nvfp4_scales_are_torchaos_but_at_e4m3_ties_and_below_its_smallest_normal(spread):
    """torchao divides ((block amax / 6) / (amax / 2688)); TE multiplies by fp32(2688 / amax) *
    fp32(1/6), and fp32(1/6) is above 1/6: where 448 * block amax / amax is exactly an E4M3
    midpoint (bf16 values make such ratios common), TE's scale rounds up where torchao's ties
    to even. torchao also clamps the scale to E4M3's smallest normal 2^-6 (``E4M3_EPS``); TE's
    goes subnormal and to 0. Every other block has the same scale and the same values."""
    x = _operand(2, shape=(256, 256), spread=spread).to(torch.bfloat16)
    scales, data = nvfp4_quantize(x, 16, per_tensor_amax_to_scale(x.float().abs().amax()))
    ours = fp4.nvfp4_quantize(x.float())
    theirs = scales.float().flatten()
    mine = ours.scales[:, ::16].flatten()
    differ = mine != theirs
    exact = (448 * x.float().double().abs().reshape(256, -1, 16).amax(-1) / x.double().abs().max()).flatten()
    tie = (exact * (1 + 1e-6)).float().to(E4M3).float() != (exact * (1 - 1e-6)).float().to(E4M3).float()
    assert torch.all(tie[differ] | (theirs[differ] == 2.0 ** -6))
    up = differ & tie & (theirs > 2.0 ** -6)
    assert torch.all(mine[up] > theirs[up])  # TE rounds the tie up
    assert up.any() or not spread
    same_block = (~differ).reshape(256, -1).repeat_interleave(16, 1)
    assert torch.equal(ours.values[same_block], _fp4_values(data, x.shape)[same_block])
    assert differ.float().mean() < (0.2 if spread else 0.02)
