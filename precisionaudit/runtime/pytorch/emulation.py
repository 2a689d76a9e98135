"""Low-precision kernels computed as the GPU computes them, in fp32 arithmetic on CPU.

A low-precision variant checked without a GPU (``check --device cpu-emulated``), the scan's
eager fallback and the range pass's target run run on CPU tensors in fp16/bf16. CPU's own
fp16/bf16 kernels cannot be trusted for that: which of them compute in fp32 and round once
depends on the instruction set torch picks at start-up (on AVX-512, ``gelu`` in fp16
differs from fp32-then-round on 6% of elements, ``pow`` on every path, ``rsqrt`` on the
default path), and CPU's fp16 GEMMs are ~50x slower than fp32 ones. So no op that computes
runs CPU's low-precision path. This dispatch mode computes each one as CUDA does:

- **opmath** (every op but those below): CUDA's elementwise kernels compute in
  ``opmath_t`` (fp32) and round once; its reductions (sum, mean, var, norm, softmax,
  log_softmax, prod, the norms) accumulate in ``acc_type`` (fp32); GEMMs and convolutions
  run on tensor cores with fp32 accumulation. So the op runs on the exact fp32 widening of
  its fp16/bf16 inputs, and each output the op gives in the low dtype is rounded to it once
  (which outputs those are, meta tensors say: a layer norm's mean and rstd stay fp32, as on
  CUDA). An op that writes into a low tensor (``add_``, ``out=``, ``_foreach_mul_``) has its
  rounded result copied into it.
- **low accumulation** (``low_accumulation``): scans (cumsum, cumprod, logcumsumexp), atomic
  adds (scatter_add, index_add, put_ accumulating) and nll_loss2d's atomic partial sums keep
  their running value in the low dtype on CUDA; they are emulated step by step.
- **exact** (``EXACT``): ops whose result does not depend on arithmetic (views, copies and
  casts, indexing, fills, max/min/sort, clamps, random fills) run CPU's kernel: the same
  bits on any CPU, without a widened copy.

Only the order of fp32 accumulation (and fp32 math functions' last bit) differs from
cuBLAS/cuDNN and CUDA's libm, so errors have the kind and size of a GPU's, not its bits.

An op whose inputs CUDA refuses (``mat1 and mat2 must have the same dtype``) raises here too
(the scan's capture computes such a product anyway with ``mixed_operands``, so that it reaches
the rest of the model); and a scalar that cannot be converted to the low dtype raises CUDA's
overflow error where CPU writes inf.
"""
from __future__ import annotations

import contextlib
import math

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode
from torch.utils import _pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode, _disable_current_modes

from ...core.numerics import dtype_name
from .dtypes import LOW_PRECISION as LOW
from .low_accumulation import (
    ATOMIC_ADDS,
    ATOMIC_PARTIAL_SUMS,
    SCAN_STEPS,
    atomic_add,
    cuda_scan,
    nll_loss2d_reduced,
)

#: GEMMs and convolutions: tensor cores on CUDA (fp16/bf16 inputs, fp32 accumulation). The
#: scan's capture computes them given a low dtype and float32 (``mixed_operands``).
FP32_COMPUTE = frozenset({
    "mm", "bmm", "addmm", "baddbmm", "addbmm", "addmv", "mv", "dot", "vdot", "addr",
    "_addmm_activation", "convolution", "convolution_backward",
})
#: CPU refuses these for fp16/bf16 where CUDA has a kernel (cuDNN's LSTM/GRU): named in the
#: report's notes, as the computation stands in for a kernel CPU does not have.
NO_CPU_KERNEL = frozenset({"mkldnn_rnn_layer", "mkldnn_rnn_layer_backward"})
#: ops whose result does not depend on arithmetic: CPU's kernel gives CUDA's bits (views
#: are recognised by their schema). A clamp is exact too: rounding is monotonic, so
#: clamping a low value to a bound and rounding gives the low value clamped to the rounded bound.
EXACT = frozenset("""
_to_copy to copy copy_ _copy_from _copy_from_and_resize clone contiguous detach detach_ alias lift
lift_fresh lift_fresh_copy _unsafe_view view_copy expand_copy permute_copy transpose_copy t_copy
slice_copy select_copy narrow_copy unsqueeze_copy squeeze_copy as_strided_copy alias_copy
detach_copy _reshape_copy unfold_copy split_copy split_with_sizes_copy unbind_copy
empty_like zeros_like ones_like full_like new_empty new_empty_strided new_zeros new_ones new_full
fill fill_ zero zero_ masked_fill masked_fill_ index_fill index_fill_ fill_diagonal_
index _unsafe_index index_select gather take take_along_dim index_copy index_copy_ embedding
cat stack masked_select masked_scatter masked_scatter_ nonzero nonzero_static argwhere where
flip roll repeat tile repeat_interleave rot90 constant_pad_nd reflection_pad1d reflection_pad2d
reflection_pad3d replication_pad1d replication_pad2d replication_pad3d _pad_circular
slice_scatter select_scatter diagonal_scatter as_strided_scatter diag diag_embed tril tril_ triu
triu_ im2col pixel_shuffle pixel_unshuffle channel_shuffle
sort argsort msort topk kthvalue max min amax amin aminmax argmax argmin maximum minimum fmax fmin
cummax cummin median nanmedian mode max_pool1d_with_indices max_pool2d_with_indices
max_pool3d_with_indices upsample_nearest1d upsample_nearest2d upsample_nearest3d
_upsample_nearest_exact1d _upsample_nearest_exact2d _upsample_nearest_exact3d
clamp clamp_ clamp_min clamp_min_ clamp_max clamp_max_ relu relu_ threshold_backward
abs abs_ neg neg_ sign signbit isnan isinf isfinite isposinf isneginf
_local_scalar_dense equal is_nonzero is_same_size any all count_nonzero unique_consecutive
unique_dim _unique _unique2 bernoulli bernoulli_ uniform_ normal_ random_ exponential_ geometric_
rand_like randn_like randint_like set_ resize_ resize_as_ _foreach_copy_
zeros ones empty empty_strided empty_permuted full scalar_tensor eye rand randn randint randperm
promote_types result_type can_cast select_backward slice_backward diagonal_backward
unsafe_split unsafe_split_with_sizes unsafe_chunk
""".split())
#: exact unless an argument asks them to add (``index_put_(..., accumulate=True)``)
_EXACT_UNLESS = {"index_put": "accumulate", "index_put_": "accumulate", "_index_put_impl_": "accumulate",
                 "_unsafe_index_put": "accumulate", "put": "accumulate", "put_": "accumulate",
                 "scatter": "reduce", "scatter_": "reduce"}
_HALF_TO_FLOAT = frozenset({"_log_softmax", "_softmax"})  # (self, dim, half_to_float)


class EmulatedKernels(TorchDispatchMode):
    """Run a low-precision variant's ops with CUDA's numerics on CPU (see the module doc).

    ``emulated``: the ops of ``NO_CPU_KERNEL`` that were computed, for the report's notes.
    ``refuse_scalars``: raise CUDA's error for a scalar the low dtype cannot hold (the
    check's verdict) rather than let CPU write inf.
    """

    def __init__(self, emulated: set | None = None, refuse_scalars: bool = True):
        super().__init__()
        self.emulated = emulated if emulated is not None else set()
        self.refuse_scalars = refuse_scalars  # the scan records such a scalar as a finding instead

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is torch.ops.aten.scalar_tensor.default and self.refuse_scalars:
            refuse_unrepresentable_scalar(args[0], kwargs.get("dtype"))
        leaves = [*_leaves(args, kwargs)]
        op = _op(func)
        if not _reads_low(leaves) or op.exact(args, kwargs):
            return func(*args, **kwargs)
        if op.name in NO_CPU_KERNEL:
            self.emulated.add(op.name)
        return _in_fp32(op, args, kwargs, leaves)


@contextlib.contextmanager
def mixed_operands(gemms: bool = True):
    """The scan's capture: a GEMM or convolution given a low dtype and float32, which CUDA
    (and CPU) refuse, is computed in fp32 and rounded to the low dtype, so that the capture
    reaches the rest of the model, where rule PA115 reports the product. Yields the ops
    found so (name -> the two dtypes), for the capture's notes. ``gemms=False`` for fake
    tensors, whose meta GEMM kernels do not refuse the operands."""
    found = {}
    with _MixedConvolutions(found), _MixedGemms(found) if gemms else contextlib.nullcontext():
        yield found


class _MixedGemms(TorchDispatchMode):
    def __init__(self, found):
        super().__init__()
        self.found = found

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = func.overloadpacket.__name__
        low = _low_with_float32(args, kwargs) if name in FP32_COMPUTE else None
        if low is None:
            return func(*args, **kwargs)
        self.found[name] = (dtype_name(low), "float32")
        return _rounded_to(low, func, args, kwargs)


class _MixedConvolutions(TorchFunctionMode):
    """A convolution's dtypes are checked before dispatch (``conv2d``'s composite kernel),
    above autocast's casts: the call is caught at the function, once it has raised."""

    def __init__(self, found):
        super().__init__()
        self.found = found

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func not in _CONVOLUTIONS:
            return func(*args, **kwargs)
        try:
            return func(*args, **kwargs)
        except RuntimeError:
            low = _low_with_float32(args, kwargs)
            if low is None:
                raise
        self.found[func.__name__] = (dtype_name(low), "float32")
        wide = pytree.tree_map_only(torch.Tensor, lambda t: t.float() if t.dtype == low else t, (args, kwargs))
        return func(*wide[0], **wide[1]).to(low)


_CONVOLUTIONS = frozenset({F.conv1d, F.conv2d, F.conv3d, F.conv_transpose1d, F.conv_transpose2d,
                           F.conv_transpose3d})


def _low_with_float32(args, kwargs):
    """The low dtype of a call whose floating tensors are of that one low dtype and float32."""
    dtypes = {t.dtype for t in pytree.tree_leaves((args, kwargs))
              if isinstance(t, torch.Tensor) and t.is_floating_point()}
    low = dtypes - {torch.float32}
    return next(iter(low)) if len(low) == 1 and torch.float32 in dtypes and low.issubset(LOW) else None


def _reads_low(leaves) -> bool:
    """Whether the call reads an fp16/bf16 tensor or names such a dtype (``arange(...,
    dtype=torch.float16)``, ``_softmax_backward_data``'s ``input_dtype``), and no float64 or
    complex tensor (those CPU computes natively, as CUDA does)."""
    low = False
    for leaf in leaves:
        if isinstance(leaf, torch.Tensor):
            if leaf.dtype == torch.float64 or leaf.is_complex():
                return False
            low |= leaf.dtype in LOW
        elif isinstance(leaf, torch.dtype) and leaf in LOW:
            low = True
    return low


class _Op:
    """What the emulation needs to know of an aten op, read from its schema once."""

    def __init__(self, func):
        self.func, self.name = func, func.overloadpacket.__name__
        arguments = func._schema.arguments
        self.positions = {a.name: (i, a.kwarg_only) for i, a in enumerate(arguments)}
        self.written = [a.name for a in arguments if a.alias_info is not None and a.alias_info.is_write]
        self.always_exact = self.name in EXACT or func.is_view
        self.unless = None if "reduce" in func._overloadname else _EXACT_UNLESS.get(self.name)

    def argument(self, args, kwargs, name):
        if name not in self.positions:
            return None
        i, kwarg_only = self.positions[name]
        return args[i] if i < len(args) and not kwarg_only else kwargs.get(name)

    def exact(self, args, kwargs) -> bool:
        return self.always_exact or (self.unless is not None and not self.argument(args, kwargs, self.unless))


_OPS: dict = {}


def _op(func) -> _Op:
    if func not in _OPS:
        _OPS[func] = _Op(func)
    return _OPS[func]


def _leaves(args, kwargs):
    """The call's arguments with lists (a TensorList, ``index``'s indices) flattened: aten
    arguments nest one level at most."""
    for value in (*args, *kwargs.values()):
        if isinstance(value, (list, tuple)):
            yield from value
        else:
            yield value


def _map(fn, value):
    """``fn`` applied to the tensors and dtypes of an argument or a result (lists flattened)."""
    if isinstance(value, (list, tuple)):
        mapped = [_map(fn, v) for v in value]
        return tuple(mapped) if isinstance(value, tuple) else mapped
    return fn(value) if isinstance(value, (torch.Tensor, torch.dtype)) else value


def _in_fp32(op, args, kwargs, leaves):
    """The op computed as CUDA computes it from its low-precision inputs (module doc): the
    result each output has in the low dtype, rounded once; a low tensor the op writes into
    receives that result."""
    func, name = op.func, op.name
    low = _one_low_dtype(leaves)
    native = _native_dtypes(func, args, kwargs, leaves)
    if low is None and (native is None or name in FP32_COMPUTE):
        return func(*args, **kwargs)  # mixed operands: the native kernel refuses them as CUDA's does
    if native is None:  # no meta kernel
        return _rounded_to(low, func, args, kwargs)
    if name in SCAN_STEPS and native[0] in LOW:
        result = cuda_scan(args[0].to(native[0]), op.argument(args, kwargs, "dim"), SCAN_STEPS[name])
        return _into_destination(op, args, kwargs, result)
    if name in ATOMIC_PARTIAL_SUMS and native[0] in LOW and op.argument(args, kwargs, "reduction"):
        result = nll_loss2d_reduced(*(op.argument(args, kwargs, n) for n in
                                      ("self", "target", "weight", "reduction", "ignore_index")))
        return _into_destination(op, args, kwargs, result)
    if name in ATOMIC_ADDS and native[0] in LOW:
        self, dim, index = (op.argument(args, kwargs, n) for n in ("self", "dim", "index"))
        source = op.argument(args, kwargs, "src" if "src" in op.positions else "source")
        alpha = op.argument(args, kwargs, "alpha")
        result = atomic_add(name, self, dim, index, source, 1 if alpha is None else alpha)
        return _into_destination(op, args, kwargs, result)
    wide_args, wide_kwargs = _map(_widen, args), {k: _map(_widen, v) for k, v in kwargs.items()}
    if name in _HALF_TO_FLOAT and len(wide_args) > 2 and wide_args[2]:
        wide_args = (*wide_args[:2], False, *wide_args[3:])  # CPU has no half_to_float; fp32 already
    out = func(*wide_args, **wide_kwargs)
    written = _write_back(op, (args, kwargs), (wide_args, wide_kwargs))
    dtypes = iter(native)
    return _map(lambda t: _round(t, next(dtypes)) if id(t) not in written else written[id(t)], out)


def _widen(x):
    """A low tensor as fp32 (exact), a low dtype argument (``input_dtype``, ``dtype``) as fp32."""
    if isinstance(x, torch.dtype):
        return torch.float32 if x in LOW else x
    return x.float() if x.dtype in LOW else x


def _round(t, dtype):
    return t.to(dtype) if t.dtype == torch.float32 and dtype in LOW else t


def _write_back(op, original, wide) -> dict:
    """Copy, rounded once, what the op wrote into the fp32 copies of low tensors (``add_``,
    ``out=``, a list of ``_foreach_mul_``) into those tensors: {id(copy): tensor}."""
    written = {}
    for name in op.written:
        before, after = op.argument(*original, name), op.argument(*wide, name)
        pairs = zip(before, after) if isinstance(before, (list, tuple)) else [(before, after)]
        for tensor, copy in pairs:
            if isinstance(tensor, torch.Tensor) and copy is not tensor:
                if tensor.shape != copy.shape:
                    tensor.resize_(copy.shape)
                tensor.copy_(copy)
                written[id(copy)] = tensor
    return written


def _into_destination(op, args, kwargs, result):
    """``result`` (a tensor, or a tuple of them) as the op returns it: written into ``self``
    (``cumsum_``) or its ``out`` tensors."""
    if not op.written:
        return result
    results = result if isinstance(result, tuple) else (result,)
    targets = [op.argument(args, kwargs, name) for name in op.written]
    for target, value in zip(targets, results):
        if target.shape != value.shape:
            target.resize_(value.shape)
        target.copy_(value)
    return tuple(targets) if isinstance(result, tuple) else targets[0]


#: (op, what its arguments' dtypes are) -> the dtypes of its tensor outputs on CUDA, or None
_NATIVE_DTYPES: dict = {}


def _native_dtypes(func, args, kwargs, leaves):
    """The dtypes of the op's tensor outputs, in order, for these inputs (from its meta
    kernel, once per op and dtype signature); None when it has no meta kernel or refuses them."""
    key = (func, *(_signature(leaf) for leaf in leaves))
    if key not in _NATIVE_DTYPES:
        meta = pytree.tree_map_only(
            torch.Tensor, lambda t: torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device="meta"),
            (args, kwargs))
        try:
            with _disable_current_modes():
                out = func(*meta[0], **meta[1])
            _NATIVE_DTYPES[key] = [t.dtype for t in pytree.tree_leaves(out) if isinstance(t, torch.Tensor)]
        except Exception:  # noqa: BLE001 - no meta kernel or an invalid call: the caller decides
            _NATIVE_DTYPES[key] = None
    return _NATIVE_DTYPES[key]


def _signature(leaf):
    """What of an argument decides the dtypes of an op's outputs (type promotion: a 0-dim
    tensor does not promote a dimensioned one of its kind)."""
    if isinstance(leaf, torch.Tensor):
        return leaf.dtype, leaf.dim() == 0
    if isinstance(leaf, (torch.dtype, bool, str)) or leaf is None:
        return leaf
    return type(leaf)


def _rounded_to(low, func, args, kwargs):
    """``func`` on the fp32 widening of its ``low`` inputs, every fp32 output rounded to ``low``."""
    wide = pytree.tree_map_only(torch.Tensor, lambda t: t.float() if t.dtype == low else t, (args, kwargs))
    out = func(*wide[0], **wide[1])
    return pytree.tree_map_only(torch.Tensor, lambda t: t.to(low) if t.dtype == torch.float32 else t, out)


def _one_low_dtype(leaves):
    """The low dtype of the call's floating tensors when they are all of that one dtype."""
    found = None
    for t in leaves:
        if isinstance(t, torch.Tensor) and t.is_floating_point():
            if t.dtype not in LOW or (found is not None and t.dtype != found):
                return None
            found = t.dtype
    return found


def refuse_unrepresentable_scalar(value, dtype):
    """``torch.where(mask, x, -1e9)`` with an fp16 ``x``: CPU makes the scalar a tensor and
    writes -inf, CUDA refuses the conversion. The emulation raises CUDA's error."""
    if dtype in LOW and isinstance(value, (int, float)) and math.isfinite(value) \
            and abs(value) > torch.finfo(dtype).max:
        name = {torch.float16: "Half", torch.bfloat16: "BFloat16"}[dtype]
        raise RuntimeError(f"value cannot be converted to type at::{name} without overflow "
                           f"({value:g} as a {dtype} scalar: CUDA raises this; CPU would write inf)")
