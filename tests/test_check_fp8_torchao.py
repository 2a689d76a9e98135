"""The FP8 emulation (runtime/pytorch/fp8.py) against torchao's own code, run on CPU: its
scales (``tensor_to_scale``), its E4M3 casts (``hp_tensor_to_float8_dynamic``), its MXFP8 blocks
(``to_mx`` with RCEIL) and a whole ``convert_to_float8_training`` forward. Skipped without
torchao (the ``fp8`` extra)."""
import copy
import warnings

import pytest
import torch

from precisionaudit.runtime.pytorch import fp8

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    torchao_float8 = pytest.importorskip("torchao.float8")
from torchao.float8 import Float8LinearConfig, convert_to_float8_training  # noqa: E402
from torchao.float8.config import ScalingGranularity  # noqa: E402
from torchao.float8.float8_scaling_utils import hp_tensor_to_float8_dynamic  # noqa: E402
from torchao.float8.float8_training_tensor import LinearMMConfig  # noqa: E402
from torchao.float8.float8_utils import tensor_to_scale  # noqa: E402

E4M3 = torch.float8_e4m3fn


def _operand(seed, shape=(64, 96), outlier=None):
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(seed)) * torch.logspace(-3, 1, shape[-1])
    if outlier:
        x[:, 5] *= outlier
    return x.to(torch.bfloat16)


@pytest.mark.parametrize("outlier", [None, 1e4])
def test_tensorwise_scale_and_bits_are_torchaos(outlier):
    x = _operand(0, outlier=outlier)
    ours = fp8.scale_of(x, "tensorwise")
    assert torch.equal(ours, tensor_to_scale(x, E4M3))
    theirs = hp_tensor_to_float8_dynamic(x, E4M3, LinearMMConfig())
    assert torch.equal(fp8.to_e4m3(x, ours).view(torch.uint8), theirs._data.view(torch.uint8))


@pytest.mark.parametrize("outlier", [None, 1e4])
@pytest.mark.parametrize("role,dim", [("input", -1), ("weight", 0)])
def test_rowwise_scales_and_bits_are_torchaos(outlier, role, dim):
    """torchao scales the input along -1 (per token) and weight.t() along 0 (per output row)."""
    x = _operand(1, outlier=outlier)
    operand = x if role == "input" else x.t()
    config = dict(scaling_granularity=ScalingGranularity.AXISWISE, axiswise_dim=dim,
                  round_scales_to_power_of_2=True)
    theirs_scale = tensor_to_scale(operand, E4M3, **config)
    ours = fp8.scale_of(x, "rowwise")  # x as (rows, K) either way
    assert torch.equal(ours, theirs_scale if role == "input" else theirs_scale.t())
    theirs = hp_tensor_to_float8_dynamic(operand, E4M3, LinearMMConfig(), **config)
    bits = theirs._data if role == "input" else theirs._data.t()
    assert torch.equal(fp8.to_e4m3(x, ours).view(torch.uint8), bits.contiguous().view(torch.uint8))


def test_mxfp8_blocks_are_torchaos_rceil():
    mx = pytest.importorskip("torchao.prototype.mx_formats.mx_tensor")
    from torchao.prototype.mx_formats.config import ScaleCalculationMode

    x = _operand(2, shape=(16, 128), outlier=1e3)
    scale_biased, data = mx.to_mx(x, E4M3, 32, ScaleCalculationMode.RCEIL)
    values, exponent = fp8.mx_quantize(x)
    assert torch.equal(exponent.flatten().to(torch.int32) + 127, scale_biased.view(torch.uint8).flatten().to(torch.int32))
    assert torch.equal(values.reshape(x.shape).view(torch.uint8), data.view(torch.uint8))


@pytest.mark.parametrize("recipe", ["tensorwise", "rowwise", "rowwise_with_gw_hp"])
@pytest.mark.parametrize("outlier", [None, 1e4])
def test_a_float8_linear_forward_is_torchaos_to_accumulation_order(recipe, outlier):
    """convert_to_float8_training's Float8Linear (torch._scaled_mm on CPU) against fp8.linear:
    the same E4M3 operands, so the outputs differ by the accumulation order at most (one bf16
    rounding step), far below the FP8 error itself."""
    torch.manual_seed(0)
    linear = torch.nn.Linear(96, 48)
    x = _operand(3, shape=(2, 32, 96), outlier=outlier)
    converted = convert_to_float8_training(copy.deepcopy(torch.nn.Sequential(linear)),
                                           config=Float8LinearConfig.from_recipe_name(recipe))
    with torch.no_grad():
        theirs = converted(x)
        ours = fp8.linear(x, linear.weight, linear.bias, recipe=recipe)
        exact = torch.nn.functional.linear(x.float(), linear.weight, linear.bias)
    assert ours.dtype == theirs.dtype == torch.bfloat16
    ulp = theirs.float().abs().clamp(min=1e-6) * 2 ** -7
    assert torch.all((ours.float() - theirs.float()).abs() <= 2 * ulp + 1e-6)
    # and the FP8 error is real: far above that
    assert (theirs.float() - exact).abs().max() > 4 * (ours.float() - theirs.float()).abs().max()
