"""Where and under which policy each variant runs.

With a GPU the baseline runs under the real ``torch.autocast("cuda")``. Without one, CPU
autocast is no stand-in (its op lists differ: softmax, layer_norm, sum, exp stay low on
CPU), so the CUDA policy is emulated op by op on CPU tensors (``emulated_cuda_autocast``:
CUDA's casting decisions, exact dtypes). The arithmetic is then CPU's: an fp16 matmul on
CPU may accumulate differently from cuBLAS, so errors are of the right kind and order,
not bit-equal to a GPU's. Ops for which CPU has no fp16/bf16 kernel that CUDA has (fp16
LSTM: oneDNN refuses it) are computed in fp32 from the low-precision inputs and rounded to
the low dtype (round-to-dtype emulation) and named in the report's notes.
"""
from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass, field

import torch
from torch.utils import _pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode

from ...capture.pytorch.cuda_autocast import autocast_policy
from ...capture.pytorch.dtypes import LOW_PRECISION as LOW
from ...core.errors import UsageError

DEVICE_CHOICES = ("auto", "cuda", "cpu", "cpu-emulated")
#: CPU kernels refused for fp16/bf16 where the CUDA counterpart exists: emulated up front.
ROUND_TO_DTYPE_OPS = {"mkldnn_rnn_layer", "mkldnn_rnn_layer_backward"}
_UNSUPPORTED = ("not implemented for 'Half'", "not implemented for 'BFloat16'",
                "could not create a primitive descriptor")


@dataclass
class Runtime:
    """``name``: what the report calls the device; ``policy_device``: whose autocast rules."""

    name: str  # "cuda" | "cpu-emulated" | "cpu"
    policy_device: str  # "cuda" | "cpu"
    torch_device: torch.device
    notes: list = field(default_factory=list)
    emulated_ops: set = field(default_factory=set)


def resolve(choice: str) -> Runtime:
    if choice not in DEVICE_CHOICES:
        raise UsageError(f"unknown device {choice!r}; expected one of {', '.join(DEVICE_CHOICES)}")
    has_gpu = torch.cuda.is_available()
    if choice == "cpu":
        return Runtime("cpu", "cpu", torch.device("cpu"))
    if choice in ("auto", "cuda") and has_gpu:
        return Runtime("cuda", "cuda", torch.device("cuda"))
    runtime = Runtime("cpu-emulated", "cuda", torch.device("cpu"))
    if choice == "cuda":
        runtime.notes.append("no GPU: CUDA autocast is emulated on CPU tensors")
    return runtime


@contextlib.contextmanager
def strict_fp32():
    """The reference is fp32 all the way: no TF32 in matmuls or cuDNN convolutions."""
    saved = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32,
             torch.get_float32_matmul_precision())
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved[:2]
        torch.set_float32_matmul_precision(saved[2])


class RoundToDtype(TorchDispatchMode):
    """Compute an op CPU cannot run in fp16/bf16 in fp32, then round its outputs back."""

    def __init__(self, runtime: Runtime):
        super().__init__()
        self.runtime = runtime

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is torch.ops.aten.scalar_tensor.default:
            refuse_unrepresentable_scalar(args[0], kwargs.get("dtype"))
        low = _low_dtype(args, kwargs)
        if low is None:
            return func(*args, **kwargs)
        name = func.overloadpacket.__name__
        if name not in ROUND_TO_DTYPE_OPS:
            try:
                return func(*args, **kwargs)
            except (RuntimeError, NotImplementedError) as exc:
                if not any(s in str(exc) for s in _UNSUPPORTED):
                    raise  # a real failure (masked_fill overflow, ...): the variant's result
        self.runtime.emulated_ops.add(name)
        up = pytree.tree_map_only(torch.Tensor, lambda t: t.float() if t.dtype in LOW else t,
                                  (args, kwargs))
        out = func(*up[0], **up[1])
        return pytree.tree_map_only(torch.Tensor,
                                    lambda t: t.to(low) if t.dtype == torch.float32 else t, out)


def refuse_unrepresentable_scalar(value, dtype):
    """``torch.where(mask, x, -1e9)`` with an fp16 ``x``: CPU makes the scalar a tensor and
    writes -inf, CUDA refuses the conversion. The emulation raises CUDA's error."""
    if dtype in LOW and isinstance(value, (int, float)) and math.isfinite(value) \
            and abs(value) > torch.finfo(dtype).max:
        name = {torch.float16: "Half", torch.bfloat16: "BFloat16"}[dtype]
        raise RuntimeError(f"value cannot be converted to type at::{name} without overflow "
                           f"({value:g} as a {dtype} scalar: CUDA raises this; CPU would write inf)")


def _low_dtype(args, kwargs):
    for t in pytree.tree_leaves((args, kwargs)):
        if isinstance(t, torch.Tensor) and t.dtype in LOW:
            return t.dtype
    return None


def numerics(runtime: Runtime):
    """Context for everything a low-precision variant runs (its backward included)."""
    if runtime.name == "cpu-emulated":
        return RoundToDtype(runtime)
    return contextlib.nullcontext()


def policy(runtime: Runtime, target):
    """The target policy around a variant's forward (pure mode: the model is already low)."""
    return autocast_policy(target, "cpu-emulated" if runtime.name == "cpu-emulated" else runtime.policy_device)


def to_device(tree, device, float_dtype=None):
    """Tensors of ``tree`` on ``device``; floating ones also cast to ``float_dtype`` if given."""
    def move(t):
        t = t.to(device)
        if float_dtype is not None and t.is_floating_point():
            t = t.to(float_dtype)
        return t
    return pytree.tree_map_only(torch.Tensor, move, tree)
