"""FP4 Linear GEMMs computed on any device: NVFP4 and MXFP4 quantize-dequantize, fp32 products.

What a Blackwell FP4 GEMM computes is exact products of E2M1 values, each 16- or 32-value
block's sum multiplied by its two block scales, accumulated in fp32, times the per-tensor
scales, rounded once to the output dtype. This computes the same in fp32 (each E2M1 value
times its scale is exact in fp32; only the accumulation order differs), so ``check --dtype
nvfp4|mxfp4`` and the range pass run without a GPU. It mirrors, function by function:

- NVFP4: Transformer Engine's reference quantizer, ``transformer_engine/pytorch/
  custom_recipes/reference_nvfp4.py`` (``NVFP4QuantizerRef._quantize_blockwise_reference``,
  ``cast_to_fp4x2``, ``_apply_rht``, ``get_wgrad_sign_vector``, ``qgemm``), which TE's
  ``tests/pytorch/nvfp4/test_nvfp4_*_exact.py`` hold the CUDA kernels to bit for bit, and
  the recipe ``NVFP4BlockScaling`` (``transformer_engine/common/recipe/__init__.py``): 1x16
  blocks for inputs and gradients, 16x16 tiles for weights, a random Hadamard transform
  (RHT) on the Wgrad GEMM's two operands only (the columnwise copies), stochastic rounding on
  gradients only.
- MXFP4: the OCP Microscaling Formats spec v1.0 (E2M1 elements, one E8M0 power-of-2 scale per
  32 values along the GEMM's reduced dim), with the scale rounded up as TE's reference
  ``cast_to_e8`` (``pow_2_scales=True``) and torchao's ``ScaleCalculationMode.RCEIL`` derive
  it, ``2^ceil(log2(amax / 6))``: no value clips. The spec's own rule (torchao's default
  ``FLOOR``), ``2^(floor(log2(amax)) - 2)``, clips a block's largest values to 6 whenever its
  amax's mantissa exceeds 1.5; ``mx_floor_clips`` counts those blocks. TE has no MXFP4
  training recipe: the backward quantizes each GEMM's operands along its reduced dim, round
  to nearest, as torchao's ``MXLinear`` does.

Where the numerics depend on the machine they are made not to: the RHT runs as a fixed
butterfly in float64 (no BLAS order), E8M0 exponents come from ``frexp`` (no ``log2``).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch.overrides import handle_torch_function, has_torch_function

from ...core.numerics import E2M1_MAX, FP4_FORMATS
from .autocast_state import autocast_disabled
from .gemm_format import quantized_gemm

#: what the FLOP counter counts an FP4 GEMM's fp32 stand-in as (gemm_format.current)
FORMAT_NAME = "float4_e2m1fn"
E4M3 = torch.float8_e4m3fn
E4M3_MAX = 448.0
NVFP4_BLOCK = FP4_FORMATS["nvfp4"]["block"]  # 16
MX_BLOCK = FP4_FORMATS["mxfp4"]["block"]  # 32
RHT_SIZE = 16
#: TE reference_nvfp4.py ``get_wgrad_sign_vector``: the fixed signs of the Wgrad RHT (torchao's
#: NVFP4Linear draws its own per layer instead)
RHT_SIGNS = (1.0, 1.0, 1.0, -1.0, 1.0, -1.0, -1.0, -1.0, -1.0, -1.0, -1.0, 1.0, -1.0, 1.0, -1.0, -1.0)
_F32_MAX = torch.finfo(torch.float32).max
#: operand roles: how each is blocked. NVFP4 weights in 16x16 tiles, everything else in 1xB
#: blocks along the last dim (the GEMM's reduced dim)
ROLES = ("input", "weight", "grad")


# --------------------------------------------------------------------------- E2M1 elements
def _steps(a: torch.Tensor) -> torch.Tensor:
    """The E2M1 spacing at ``a`` (0 <= a <= 6): 0.5 below 2, 1 below 4, 2 up to 6, i.e.
    2^(e - 2) for a = m * 2^e (m in [0.5, 1)), e at least 1 (exact: frexp, ldexp)."""
    _, exponent = torch.frexp(a)
    return torch.ldexp(torch.full_like(a, 0.25), exponent.clamp(min=1))


def round_e2m1(x: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
    """``x`` (fp32, already scaled) rounded to E2M1 values, saturated at +-6, as fp32.

    Without ``generator``: round to nearest, ties to even, as TE's ``cast_to_fp4x2`` (its
    thresholds: [0, 0.25] -> 0, (0.25, 0.75) -> 0.5, [0.75, 1.25] -> 1, ..., [3.5, 5] -> 4,
    above 5 -> 6) and the ``cvt.rn.satfinite.e2m1x2.f32`` instruction. With it: stochastic
    rounding (``cvt.rs.satfinite``), up to the next E2M1 value with probability equal to the
    distance from the lower one over the gap (uniform draws in [0, 1) from ``generator``), so
    the expected result is the value itself within [-6, 6]. Signs are kept (a value that
    rounds to 0 is +-0)."""
    a = x.abs().clamp(max=E2M1_MAX)
    step = _steps(a)
    if generator is None:
        q = torch.round(a / step) * step  # torch.round: ties to even, exact (step is a power of 2)
    else:
        units = a / step
        low = torch.floor(units)
        draws = torch.rand(a.shape, generator=generator, dtype=torch.float32, device=generator.device)
        up = draws.to(a.device) < (units - low)
        q = (low + up) * step
    return torch.copysign(q, x)


# --------------------------------------------------------------------------- the Hadamard transform
def hadamard_matrix() -> torch.Tensor:
    """TE's ``_build_hadamard_matrix(16, with_random_sign_mask=True) / 4``: diag(signs) @ H16
    (Sylvester) scaled by 1/sqrt(16); orthonormal, so the Wgrad GEMM's two transforms cancel."""
    h = torch.ones(1, 1, dtype=torch.float64)
    while h.shape[0] < RHT_SIZE:
        h = torch.cat([torch.cat([h, h], 1), torch.cat([h, -h], 1)], 0)
    return torch.tensor(RHT_SIGNS, dtype=torch.float64)[:, None] * h / 4


_HADAMARD: dict = {}


def rht(x: torch.Tensor) -> torch.Tensor:
    """TE's ``_apply_rht``: every 16 values along the last dim times the signed Hadamard matrix
    (``x_mat @ (H * 1/4)``), returned in ``x``'s dtype. TE runs it on bf16 operands with fp32
    accumulation and a bf16 result; here the 16-term sums run in float64, where they are exact
    for values within 2^29 of each other (whatever order a BLAS kernel sums them in: the same
    result on every machine), so the fp32 sum TE rounds is this one; rounded once to fp32,
    then to ``x``'s dtype."""
    if x.shape[-1] % RHT_SIZE:
        raise ValueError(f"the RHT needs the last dim divisible by {RHT_SIZE}, got {x.shape[-1]}")
    h = _HADAMARD.get(x.device)
    if h is None:
        h = _HADAMARD[x.device] = hadamard_matrix().to(x.device)
    out = (x.to(torch.float64).reshape(-1, RHT_SIZE) @ h).to(torch.float32)
    return out.reshape(x.shape).to(x.dtype)


# --------------------------------------------------------------------------- quantization
@dataclass
class Quantized:
    """A 2-D operand as an FP4 GEMM reads it: ``values`` (E2M1 values as fp32, the operand's
    shape), ``scales`` (each value's block decode scale as fp32: an E4M3 or E8M0 number,
    expanded to the operand's shape) and ``amax`` (NVFP4's per-tensor amax; None for MXFP4).
    ``values * scales * tensor_scale`` is the dequantized operand."""

    fmt: str
    values: torch.Tensor
    scales: torch.Tensor
    amax: torch.Tensor | None

    @property
    def tensor_scale(self) -> torch.Tensor | float:
        """NVFP4: amax / (6 * 448), the decode factor TE's tests dequantize with (``qgemm``'s
        alpha is the product of two); MXFP4: 1."""
        return 1.0 if self.amax is None else self.amax / (E2M1_MAX * E4M3_MAX)

    def dequantize(self) -> torch.Tensor:
        return self.values * self.scales * self.tensor_scale


def _pad(x: torch.Tensor, rows: int, cols: int) -> torch.Tensor:
    """TE's ``_pad_tensor``: zeros appended to make the dims multiples of the tile."""
    pr, pc = -x.shape[0] % rows, -x.shape[1] % cols
    return torch.nn.functional.pad(x, (0, pc, 0, pr)) if pr or pc else x


def _tiles(x: torch.Tensor, tile: tuple[int, int]) -> torch.Tensor:
    """A padded 2-D ``x`` as (row tiles, tile rows, column tiles, tile columns): a view."""
    r, c = tile
    m, n = x.shape
    return x.view(m // r, r, n // c, c)


def _block_amax(x: torch.Tensor, tile: tuple[int, int]) -> torch.Tensor:
    """The amax of each tile of a padded 2-D ``x``, one per tile (broadcastable to ``_tiles``)."""
    return _tiles(x, tile).abs().amax(dim=(1, 3), keepdim=True)


def _untile(t: torch.Tensor, like: torch.Tensor, m: int, n: int) -> torch.Tensor:
    """Per-tile (or per-value) ``t`` broadcast over ``like``'s tiles, as ``like``'s 2-D shape,
    cropped to m x n."""
    return t.expand_as(like).reshape(like.shape[0] * like.shape[1], -1)[:m, :n]


def nvfp4_quantize(x: torch.Tensor, tile: tuple[int, int] = (1, NVFP4_BLOCK),
                   generator: torch.Generator | None = None) -> Quantized:
    """TE ``NVFP4QuantizerRef._quantize_blockwise_reference`` (``pow_2_scales=False``) of a
    2-D ``x``: global_encode = 448 * 6 / amax (fp32, at most fp32's max, 1 where it is 0); a
    tile's decode scale = e4m3(clamp(tile amax * (global_encode * fp32(1/6)), +-448)); its
    encode scale = min(1 / (decode * (1 / global_encode)), fp32 max); values = E2M1 of
    clamp(x * encode, +-6) (``round_e2m1``, stochastic with ``generator``). ``tile``: (1, 16)
    for inputs and gradients, (16, 16) for weights (the recipe's 2D quantization)."""
    m, n = x.shape
    x = _pad(x.to(torch.float32), *tile)
    tiles = _tiles(x, tile)
    amax = x.abs().amax()
    encode = torch.tensor(E4M3_MAX * E2M1_MAX, dtype=torch.float32) / amax
    encode = torch.clamp(encode, max=_F32_MAX)
    encode = torch.where(encode == 0, torch.ones_like(encode), encode)
    decode_global = torch.tensor(1.0, dtype=torch.float32) / encode
    multiplier = encode * torch.reciprocal(torch.tensor(E2M1_MAX, dtype=torch.float32))
    decode = torch.clamp(_block_amax(x, tile) * multiplier, max=_F32_MAX).clamp(-E4M3_MAX, E4M3_MAX)
    decode = decode.to(E4M3).to(torch.float32)
    block_encode = torch.clamp(torch.tensor(1.0, dtype=torch.float32) / (decode * decode_global), max=_F32_MAX)
    values = round_e2m1(torch.clamp(tiles * block_encode, -E2M1_MAX, E2M1_MAX), generator)
    return Quantized("nvfp4", _untile(values, tiles, m, n), _untile(decode, tiles, m, n), amax)


def e8m0_exponent(decode: torch.Tensor) -> torch.Tensor:
    """TE's ``cast_to_e8``: ceil(log2(decode)) clamped to [-127, 127], computed exactly with
    frexp (decode = m * 2^e, m in [0.5, 1): ceil(log2) is e - 1 when m is 0.5, else e); a
    zero block gets -127. As int32."""
    mantissa, exponent = torch.frexp(decode)
    exponent = torch.where(mantissa == 0.5, exponent - 1, exponent)
    return torch.where(decode > 0, exponent, torch.full_like(exponent, -127)).clamp(-127, 127)


def mxfp4_quantize(x: torch.Tensor, generator: torch.Generator | None = None) -> Quantized:
    """TE's reference with ``pow_2_scales=True``, 1x32 tiles (the OCP MX block): decode =
    2^ceil(log2(block amax / 6)) (``e8m0_exponent``), encode = 1 / decode, values = E2M1 of
    clamp(x * encode, +-6)."""
    m, n = x.shape
    x = _pad(x.to(torch.float32), 1, MX_BLOCK)
    tiles = _tiles(x, (1, MX_BLOCK))
    exponent = e8m0_exponent(_block_amax(x, (1, MX_BLOCK)) / E2M1_MAX)
    one = torch.ones_like(exponent, dtype=torch.float32)
    decode, encode = torch.ldexp(one, exponent), torch.ldexp(one, -exponent)
    values = round_e2m1(torch.clamp(tiles * encode, -E2M1_MAX, E2M1_MAX), generator)
    return Quantized("mxfp4", _untile(values, tiles, m, n), _untile(decode, tiles, m, n), None)


def tile_of(fmt: str, role: str) -> tuple[int, int]:
    """The block a value of ``role`` shares its scale with: NVFP4 weights 16x16, other NVFP4
    operands 1x16, MXFP4 1x32 (rows x values along the reduced dim)."""
    if fmt == "nvfp4":
        return (NVFP4_BLOCK, NVFP4_BLOCK) if role == "weight" else (1, NVFP4_BLOCK)
    if fmt == "mxfp4":
        return (1, MX_BLOCK)
    raise ValueError(f"unknown FP4 format {fmt!r}")


def quantize(x: torch.Tensor, fmt: str, role: str = "input", generator: torch.Generator | None = None) -> Quantized:
    """A 2-D GEMM operand (its reduced dim last) in ``fmt`` as the recipe quantizes ``role``:
    NVFP4 weights in 16x16 tiles, the rest in 1x16 blocks; MXFP4 in 1x32 blocks."""
    tile = tile_of(fmt, role)
    return nvfp4_quantize(x, tile, generator) if fmt == "nvfp4" else mxfp4_quantize(x, generator)


def quantize_dequantize(x: torch.Tensor, fmt: str, role: str = "input") -> torch.Tensor:
    """A 2-D operand as the FP4 GEMM sees it, in fp32 (round to nearest)."""
    return quantize(x, fmt, role).dequantize()


def mx_floor_clips(x: torch.Tensor) -> torch.Tensor:
    """Per 1x32 block of a 2-D ``x``: whether the OCP spec's scale rule (section 6.3,
    torchao's default ``ScaleCalculationMode.FLOOR``), 2^(floor(log2(amax)) - 2), clips the
    block's largest value (amax / scale above 6). The emulation rounds the scale up instead."""
    amax = _block_amax(_pad(x.to(torch.float32), 1, MX_BLOCK), (1, MX_BLOCK))[:, 0, :, 0]
    mantissa, _ = torch.frexp(amax)  # amax / 2^floor(log2 amax) = 2 * mantissa, in [1, 2)
    return (2 * mantissa) * 4 > E2M1_MAX


# --------------------------------------------------------------------------- the GEMMs
def gemm(a: Quantized, b: Quantized) -> torch.Tensor:
    """``a @ b.T`` (a: M x K, b: N x K) as TE's ``qgemm``: each E2M1 value times its block
    scale (exact in fp32), products accumulated in fp32, times alpha = the two per-tensor
    scales (NVFP4; 1 for MXFP4), as fp32."""
    with quantized_gemm(FORMAT_NAME):
        out = (a.values * a.scales) @ (b.values * b.scales).t()
    if a.amax is not None:
        out = out * (a.amax * b.amax / (E2M1_MAX * E2M1_MAX * E4M3_MAX * E4M3_MAX))
    return out


def _rows_padded(x: torch.Tensor, multiple: int) -> torch.Tensor:
    """``x`` (tokens x features) with zero rows appended to a multiple: the Wgrad GEMM's RHT
    and blocks run along the tokens (TE requires M % 16; zeros change no sum and no amax)."""
    return _pad(x, multiple, 1)


def wgrad(x: torch.Tensor, dy: torch.Tensor, fmt: str, generator: torch.Generator | None = None) -> torch.Tensor:
    """dW = dY^T @ X (x: M x K, dy: M x N) as the recipe's Wgrad GEMM computes it: NVFP4 with
    both operands' columnwise copies (dY^T, X^T: blocks along M) through the RHT and dY's
    rounded stochastically (``generator``); MXFP4 with 1x32 blocks along M, round to nearest."""
    if fmt == "nvfp4":
        x_t = rht(_rows_padded(x, RHT_SIZE).t().contiguous())
        dy_t = rht(_rows_padded(dy, RHT_SIZE).t().contiguous())
        return gemm(quantize(dy_t, fmt, "grad", generator), quantize(x_t, fmt, "input"))
    return gemm(quantize(dy.t().contiguous(), fmt, "grad"), quantize(x.t().contiguous(), fmt, "input"))


def dgrad(dy: torch.Tensor, w: Quantized | torch.Tensor, fmt: str,
          generator: torch.Generator | None = None) -> torch.Tensor:
    """dX = dY @ W (dy: M x N, w: N x K): dY in 1xB blocks along N (stochastic rounding under
    NVFP4), W's columnwise copy (W^T: K x N). NVFP4's 16x16 weight tiles are the same tiles
    either way round, so W^T's quantization is W's transposed (TE quantizes it from the
    weight itself: the same values)."""
    if fmt == "nvfp4":
        wq = w if isinstance(w, Quantized) else quantize(w, fmt, "weight")
        wt = Quantized(fmt, wq.values.t(), wq.scales.t(), wq.amax)
    else:
        wt = quantize(w.t().contiguous(), fmt, "weight")
    return gemm(quantize(dy, fmt, "grad", generator if fmt == "nvfp4" else None), wt)


class _Fp4Linear(torch.autograd.Function):
    """The three GEMMs of an FP4 Linear (the recipe's Fprop, Dgrad and Wgrad)."""

    @staticmethod
    def forward(ctx, x, weight, fmt, generator):
        wq = quantize(weight, fmt, "weight")
        out = gemm(quantize(x, fmt, "input"), wq)
        ctx.save_for_backward(x, weight)
        ctx.fmt, ctx.generator = fmt, generator
        return out.to(x.dtype)

    @staticmethod
    def backward(ctx, dy):
        x, weight = ctx.saved_tensors
        fmt, generator = ctx.fmt, ctx.generator
        dx = dw = None
        if ctx.needs_input_grad[0]:
            dx = dgrad(dy, weight, fmt, generator).to(x.dtype)
        if ctx.needs_input_grad[1]:
            dw = wgrad(x, dy, fmt, generator).to(weight.dtype)
        return dx, dw, None, None


def linear(input: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None, *,
           fmt: str = "nvfp4", generator: torch.Generator | None = None) -> torch.Tensor:
    """An FP4 ``nn.Linear`` forward (and, through autograd, its backward), as TE's ``te.Linear``
    under ``autocast(recipe=NVFP4BlockScaling())`` runs it: under torch autocast the input is
    cast to the autocast dtype (the weight is quantized from its own fp32 copy); the output has
    the input's dtype; the bias is added after the GEMM in that dtype. ``generator``: the
    stochastic rounding's draws (NVFP4 gradients). Overridable like ``F.linear``, so that a
    TorchFunctionMode (the check's divergence probe) sees the module's linear; what it
    computes inside is no op of the model."""
    if has_torch_function((input, weight, bias)):
        return handle_torch_function(linear, (input, weight, bias), input, weight, bias, fmt=fmt,
                                     generator=generator)
    device = input.device.type
    if torch.is_autocast_enabled(device):
        input = input.to(torch.get_autocast_dtype(device))
    with torch._C.DisableTorchFunction(), autocast_disabled():
        rows = input.reshape(-1, input.shape[-1])
        out = _Fp4Linear.apply(rows, weight, fmt, generator).reshape(*input.shape[:-1], weight.shape[0])
        if bias is not None:
            out = out + bias.to(out.dtype)
    return out
