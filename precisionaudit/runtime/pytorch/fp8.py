"""FP8 Linear GEMMs computed on any device: quantize-dequantize in E4M3, multiply in fp32.

What a GPU's FP8 GEMM computes (``torch._scaled_mm``, cuBLASLt) is exact products of E4M3
values, accumulated in fp32, scaled, rounded once to the output dtype. This computes the
same in fp32 arithmetic (only the accumulation order differs), so ``check --dtype float8``
runs without a GPU. Scales follow the published recipes, cited per function:

- tensorwise (torchao ``Float8LinearConfig()``): one fp32 scale per tensor,
  ``448 / amax`` (torchao/float8/float8_utils.py ``amax_to_scale``, amax clamped to 1e-12,
  computed in float64 and rounded to fp32), values multiplied in fp32 and cast with
  saturation (``to_fp8_saturated``); the GEMM output is ``acc / (s_x * s_w)``.
- rowwise and rowwise_with_gw_hp (torchao ``Float8LinearConfig.from_recipe_name``): one scale
  per row of the input (per token, amax over K) and per output row of the weight (amax over
  K), each rounded down to a power of 2 (``round_scales_to_power_of_2=True``,
  ``_round_scale_down_to_power_of_2``). The two recipes' forwards are the same; they differ
  in the backward only.
- delayed (Transformer Engine ``DelayedScaling``): ``scale = 448 / amax_history`` (margin 0).
  On one forward of one batch there is no history but the current amax, so this is the
  tensorwise scale of the current tensor: the steady state of a run whose amax varies little
  from step to step. TE's very first step, with its initial scale 1, is not modelled.
- mxfp8 (OCP Microscaling spec v1.0; torchao ``_to_mx_rceil``, the MXFP8 training default
  ``ScaleCalculationMode.RCEIL``, as cuBLAS and Transformer Engine derive it): blocks of 32
  along K, one power-of-2 (E8M0) scale per block, ``2^ceil(log2(amax / 448))``.

The forward only: E5M2 gradients (the backward of the hybrid recipes) are not computed.
"""
from __future__ import annotations

import torch
from torch.overrides import handle_torch_function, has_torch_function

from .autocast_state import autocast_disabled
from .gemm_format import quantized_gemm

E4M3 = torch.float8_e4m3fn
E4M3_MAX = float(torch.finfo(E4M3).max)  # 448
#: torchao/float8/float8_utils.py EPS: the smallest amax a scale is computed from
AMAX_EPS = 1e-12
MX_BLOCK = 32
E8M0_BIAS = 127
#: per recipe: how scales are laid out ("tensor", "row", "block")
GRANULARITY = {"tensorwise": "tensor", "delayed": "tensor", "rowwise": "row", "rowwise_with_gw_hp": "row",
               "mxfp8": "block"}
#: what the FLOP counter counts an FP8 GEMM's fp32 stand-in as (gemm_format.current)
FORMAT_NAME = "float8_e4m3fn"


def amax_to_scale(amax: torch.Tensor, power_of_2: bool = False) -> torch.Tensor:
    """torchao's ``amax_to_scale`` for E4M3: 448 / max(amax, 1e-12) in float64, as fp32;
    rounded down to a power of 2 when asked (rowwise)."""
    scale = (E4M3_MAX / amax.to(torch.float64).clamp(min=AMAX_EPS)).to(torch.float32)
    return torch.exp2(torch.floor(torch.log2(scale))) if power_of_2 else scale


def to_e4m3(t: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """``t * scale`` in fp32, saturated to +-448 and rounded to E4M3 (``to_fp8_saturated``)."""
    return (t.to(torch.float32) * scale).clamp(-E4M3_MAX, E4M3_MAX).to(E4M3)


def scale_of(t: torch.Tensor, recipe: str) -> torch.Tensor:
    """The E4M3 scale of a GEMM operand whose reduced dim (K) is its last: one scalar
    (tensorwise, delayed) or one per row (rowwise: per token of an input, per output row
    of a weight)."""
    granularity = GRANULARITY[recipe]
    if granularity == "tensor":
        return amax_to_scale(t.abs().max())
    if granularity == "row":
        return amax_to_scale(t.abs().amax(dim=-1, keepdim=True), power_of_2=True)
    raise ValueError(f"{recipe} scales blocks: use mx_quantize")


def mx_quantize(t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(E4M3 values, E8M0 exponents as float32 powers) of ``t`` in blocks of 32 along its
    last dim: exponent ``clamp(ceil(log2(amax / 448)), -127, 127)`` per block (torchao
    ``_to_mx_rceil``); dequantized value = value * 2^exponent."""
    blocks = t.to(torch.float32).reshape(*t.shape[:-1], t.shape[-1] // MX_BLOCK, MX_BLOCK)
    descale = blocks.abs().amax(dim=-1, keepdim=True) / E4M3_MAX
    exponent = torch.ceil(torch.log2(descale)).clamp(-E8M0_BIAS, E8M0_BIAS)
    values = (blocks * torch.exp2(-exponent)).clamp(-E4M3_MAX, E4M3_MAX).to(E4M3)
    return values, exponent


def mx_dequantize(values: torch.Tensor, exponent: torch.Tensor) -> torch.Tensor:
    blocks = values.to(torch.float32) * torch.exp2(exponent)
    return blocks.reshape(*blocks.shape[:-2], -1)


def quantize_dequantize(t: torch.Tensor, recipe: str) -> torch.Tensor:
    """``t`` (a GEMM operand, K last) as the FP8 GEMM sees it, in fp32."""
    if GRANULARITY[recipe] == "block":
        return mx_dequantize(*mx_quantize(t))
    scale = scale_of(t, recipe)
    return to_e4m3(t, scale).to(torch.float32) / scale


def fp8_gemm(x: torch.Tensor, weight: torch.Tensor, recipe: str, out_dtype: torch.dtype) -> torch.Tensor:
    """``x @ weight.T`` (x: (..., K), weight: (N, K)) as an FP8 GEMM computes it: operands
    in E4M3 under the recipe's scales, exact products accumulated in fp32, scales applied to
    the accumulator, one rounding to ``out_dtype``."""
    rows = x.reshape(-1, x.shape[-1])
    with quantized_gemm(FORMAT_NAME):
        if GRANULARITY[recipe] == "block":
            out = mx_dequantize(*mx_quantize(rows)) @ mx_dequantize(*mx_quantize(weight)).t()
        else:
            sx, sw = scale_of(rows, recipe), scale_of(weight, recipe)
            acc = to_e4m3(rows, sx).to(torch.float32) @ to_e4m3(weight, sw).to(torch.float32).t()
            out = acc * (sx.reciprocal() * sw.reciprocal().reshape(1, -1))
    return out.to(out_dtype).reshape(*x.shape[:-1], weight.shape[0])


def linear(input: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None, *,
           recipe: str = "tensorwise") -> torch.Tensor:
    """An FP8 ``nn.Linear`` forward, as torchao's ``Float8Linear.forward`` runs it: under
    autocast the input is cast to the autocast dtype (the weight is quantized from its own,
    fp32 master copy); the GEMM's output has the input's dtype; the bias is added after it,
    cast to that dtype. Named ``linear`` and overridable like ``F.linear``, so that a
    TorchFunctionMode (the check's divergence probe) sees it as the module's linear; what
    it computes inside is no op of the model (no mode, no autocast sees it)."""
    if has_torch_function((input, weight, bias)):
        return handle_torch_function(linear, (input, weight, bias), input, weight, bias, recipe=recipe)
    device = input.device.type
    if torch.is_autocast_enabled(device):
        input = input.to(torch.get_autocast_dtype(device))
    with torch._C.DisableTorchFunction(), autocast_disabled():
        out = fp8_gemm(input, weight, recipe, input.dtype)
        if bias is not None:
            out = out + bias.to(out.dtype)
    return out
