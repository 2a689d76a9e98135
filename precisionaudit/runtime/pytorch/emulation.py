"""Low-precision kernels computed as the GPU computes them, in fp32 arithmetic on CPU.

A low-precision variant checked without a GPU (``check --device cpu-emulated``) and the
scan's eager fallback run on CPU tensors in fp16/bf16. Two kinds of CPU kernels are wrong
for that, and this dispatch mode replaces them:

- kernels CUDA computes in fp32 from fp16/bf16 values where CPU's differ (``FP32_COMPUTE``):
  tensor-core GEMMs and convolutions (fp16/bf16 inputs, fp32 accumulation, output rounded
  once to the stored dtype), ``log_softmax`` and ``prod`` (fp32 accumulators, ``acc_type``).
  CPU's fp16/bf16 GEMMs are also ~50x slower than fp32 ones (a 512x768x3072 matmul:
  2.5-9 s against 0.05-0.08 s). They are computed here as the GPU does: the inputs (already
  rounded to the low dtype) are widened exactly to fp32, the op runs in fp32, and the result
  is rounded to the low dtype. Only the accumulation order differs from cuBLAS/cuDNN.
- ops CPU has no fp16/bf16 kernel for where CUDA has one (``NO_CPU_KERNEL``, fp16 LSTM in
  oneDNN; and any op that raises "not implemented for 'Half'"): computed the same way and
  named in the report's notes.

Every other op runs CPU's own kernel: CPU's elementwise fp16/bf16 kernels compute in fp32
(``opmath``) and round once, and its sum/mean/var/softmax/norm reductions accumulate in fp32,
as CUDA's do (tests/test_emulation.py holds that claim op by op). Not emulated, and said so
in the notes' documentation: CUDA's fp16 ``cumsum`` accumulates in fp16 (each partial sum
rounded) where CPU's accumulates in fp32, so the emulation understates that hazard.

An op whose floating inputs are not all of one low dtype runs natively, so the errors CUDA
raises there (``mat1 and mat2 must have the same dtype``) are raised here too (the scan's
capture computes such a product anyway with ``mixed_operands``, so that it reaches the rest of
the model); and a scalar that cannot be converted to the low dtype raises CUDA's overflow
error where CPU writes inf.
"""
from __future__ import annotations

import contextlib
import math

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode
from torch.utils import _pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode

from ...core.numerics import dtype_name
from .dtypes import LOW_PRECISION as LOW

#: aten ops (overload packets) that CUDA computes in fp32 from fp16/bf16 inputs and whose
#: CPU kernel differs (slower, or accumulating in the low dtype): the kernel-numerics the
#: emulation needs. GEMMs and convolutions use tensor cores: fp32 accumulation, output
#: rounded to the input dtype.
FP32_COMPUTE = frozenset({
    "mm", "bmm", "addmm", "baddbmm", "addbmm", "addmv", "mv", "dot", "vdot", "addr",
    "_addmm_activation", "convolution", "convolution_backward",
    "_log_softmax", "_log_softmax_backward_data", "prod",
})
#: CPU refuses these for fp16/bf16 where CUDA has a kernel (cuDNN's LSTM/GRU).
NO_CPU_KERNEL = frozenset({"mkldnn_rnn_layer", "mkldnn_rnn_layer_backward"})
_UNSUPPORTED = ("not implemented for 'Half'", "not implemented for 'BFloat16'",
                "could not create a primitive descriptor")
_HALF_TO_FLOAT = frozenset({"_log_softmax", "_softmax"})  # (self, dim, half_to_float)


class EmulatedKernels(TorchDispatchMode):
    """Run a low-precision variant's ops with CUDA's numerics on CPU (see the module doc).

    ``emulated``: the ops of ``NO_CPU_KERNEL`` (or refused by CPU) that were computed in
    fp32 and rounded, for the report's notes. ``refuse_scalars``: raise CUDA's error for a
    scalar the low dtype cannot hold (the check's verdict) rather than let CPU write inf.
    """

    def __init__(self, emulated: set | None = None, refuse_scalars: bool = True):
        super().__init__()
        self.emulated = emulated if emulated is not None else set()
        self.refuse_scalars = refuse_scalars  # the scan records such a scalar as a finding instead

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is torch.ops.aten.scalar_tensor.default and self.refuse_scalars:
            refuse_unrepresentable_scalar(args[0], kwargs.get("dtype"))
        low = _one_low_dtype(args, kwargs)
        if low is None:
            return func(*args, **kwargs)
        name = func.overloadpacket.__name__
        if name in FP32_COMPUTE:
            return _in_fp32(func, args, kwargs, low)
        if name not in NO_CPU_KERNEL:
            try:
                return func(*args, **kwargs)
            except (RuntimeError, NotImplementedError) as exc:
                if not any(s in str(exc) for s in _UNSUPPORTED):
                    raise  # a real failure (masked_fill overflow, ...): the variant's result
        self.emulated.add(name)
        return _in_fp32(func, args, kwargs, low)


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
        return _in_fp32(func, args, kwargs, low)


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


def _in_fp32(func, args, kwargs, low):
    """``func`` on the fp32 widening of its low-precision inputs (exact), its fp32 results
    rounded to ``low`` -- or to the dtype the call asks for explicitly."""
    out_dtype = _explicit_dtype(func, args, kwargs) or low
    if func.overloadpacket.__name__ in _HALF_TO_FLOAT and len(args) > 2 and args[2]:
        args, out_dtype = (*args[:2], False, *args[3:]), torch.float32
    wide = pytree.tree_map_only(torch.Tensor, lambda t: t.float() if t.dtype in LOW else t,
                                (args, kwargs))
    out = func(*wide[0], **wide[1])
    return pytree.tree_map_only(
        torch.Tensor, lambda t: t.to(out_dtype) if t.dtype == torch.float32 else t, out)


def _explicit_dtype(func, args, kwargs):
    """The ``dtype`` argument of the call (``prod(x, dtype=torch.float32)``), if given."""
    for i, arg in enumerate(func._schema.arguments):
        if arg.name == "dtype":
            value = kwargs.get("dtype", args[i] if i < len(args) and not arg.kwarg_only else None)
            return value if isinstance(value, torch.dtype) else None
    return None


def _one_low_dtype(args, kwargs):
    """The low dtype of the call's floating tensors when they are all of that one dtype."""
    found = None
    for t in pytree.tree_leaves((args, kwargs)):
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
