"""Run CUDA's autocast policy on CPU tensors (real or fake).

CUDA autocast cannot run without a GPU, and CPU autocast has a different op policy
(softmax, layer_norm, sum and exp stay in fp16 on CPU). So, while a capture or a check
runs, we register Python kernels under the ``AutocastCPU`` dispatch key that apply
CUDA's casting rules (the lists in PyTorch's ``autocast_mode.cpp``), neutralise every
other op that CPU autocast would cast, and map ``torch.autocast("cuda", ...)`` in user
code onto the CPU autocast it now stands for. Everything is undone on exit.
"""
from __future__ import annotations

import contextlib
import functools
import warnings

import torch
from torch.utils import _pytree as pytree

from ...core.autocast_policy import BANNED_MESSAGE, POLICY

_AUTOCAST_CPU = torch._C.DispatchKeySet(torch._C.DispatchKey.AutocastCPU)


def _op(overload_name: str):
    packet, _, overload = overload_name.partition(".")
    return getattr(getattr(torch.ops.aten, packet), overload or "default")


def _eligible(t) -> bool:
    return isinstance(t, torch.Tensor) and t.is_floating_point() and t.dtype != torch.float64


def _cast_all(args, kwargs, dtype):
    return pytree.tree_map_only(
        torch.Tensor, lambda t: t.to(dtype) if _eligible(t) and t.dtype != dtype else t,
        (args, kwargs))


def _first_tensor(args):
    return next((a for a in pytree.tree_leaves(args) if isinstance(a, torch.Tensor)), None)


def _widest(args, kwargs):
    dtypes = [t.dtype for t in pytree.tree_leaves((args, kwargs)) if _eligible(t)]
    if torch.float32 in dtypes:
        return torch.float32
    return dtypes[0] if dtypes else None


def _dtype_position(op) -> int | None:
    """Index of the ``ScalarType? dtype`` argument in the op's schema (softmax.int: 2)."""
    return next((i for i, a in enumerate(op._schema.arguments)
                 if a.name == "dtype" and not a.kwarg_only), None)


def _set_opt_dtype(args, kwargs, position):
    """CUDA's set_opt_dtype: an unset dtype becomes fp32; a dtype the caller passed, by
    position (``F.softmax(x, -1, torch.float32)`` reaches aten as softmax.int(x, -1, f32))
    or by keyword, is kept."""
    if position is not None and len(args) > position:
        if args[position] is None:
            args = (*args[:position], torch.float32, *args[position + 1:])
        return args, kwargs
    if kwargs.get("dtype") is None:
        kwargs = dict(kwargs, dtype=torch.float32)
    return args, kwargs


def _make_kernel(name: str, kind: str, low: torch.dtype, on_banned):
    op = _op(name)
    dtype_at = _dtype_position(op)

    def kernel(*args, **kwargs):
        with torch._C._ExcludeDispatchKeyGuard(_AUTOCAST_CPU):
            if kind == "lower_precision_fp":
                args, kwargs = _cast_all(args, kwargs, low)
            elif kind == "half":  # cuDNN RNNs: float16 under any autocast dtype
                args, kwargs = _cast_all(args, kwargs, torch.float16)
            elif kind == "fp32":
                args, kwargs = _cast_all(args, kwargs, torch.float32)
            elif kind == "fp32_set_opt_dtype":
                if _eligible(_first_tensor(args)):
                    args, kwargs = _set_opt_dtype(args, kwargs, dtype_at)
            elif kind == "fp32_append_dtype":
                if _eligible(_first_tensor(args)):
                    return _norm_with_dtype(args, kwargs)
            elif kind == "promote":
                widest = _widest(args, kwargs)
                if widest is not None:
                    args, kwargs = _cast_all(args, kwargs, widest)
            elif kind == "banned":
                on_banned(name)
                args, kwargs = _cast_all(args, kwargs, torch.float32)
            return op(*args, **kwargs)

    return kernel


def _norm_with_dtype(args, kwargs):
    """norm.Scalar / norm.ScalarOpt_dim have no dtype argument: CUDA calls the dtype overload."""
    self, *rest = args
    p = rest[0] if rest else kwargs.get("p", 2)
    dim = rest[1] if len(rest) > 1 else kwargs.get("dim")
    keepdim = rest[2] if len(rest) > 2 else kwargs.get("keepdim", False)
    if dim is None:
        return torch.ops.aten.norm.ScalarOpt_dtype(self, p, dtype=torch.float32)
    return torch.ops.aten.norm.ScalarOpt_dim_dtype(self, p, dim, keepdim, dtype=torch.float32)


@functools.cache
def _cpu_autocast_ops() -> list[str]:
    """The aten ops CPU autocast has a kernel for: fixed once torch is loaded, and 14 ms to
    list, which every forward under the policy (the range pass: every batch) would pay again."""
    names = torch._C._dispatch_get_all_op_names()
    return [n.split("::", 1)[1] for n in names
            if n.startswith("aten::") and torch._C._dispatch_has_kernel_for_dispatch_key(n, "AutocastCPU")]


def _raise_banned(name):
    raise RuntimeError(BANNED_MESSAGE)


@contextlib.contextmanager
def _autocast_device_redirect(dtype: torch.dtype):
    """Make ``torch.autocast("cuda", ...)`` and autocast queries in user code see the emulation."""
    cls = torch.amp.autocast_mode.autocast
    original = cls.__init__

    def __init__(self, device_type, dtype_=None, enabled=True, cache_enabled=None, **kw):
        dtype_ = kw.pop("dtype", dtype_)
        if device_type == "cuda":
            device_type, dtype_ = "cpu", dtype_ or dtype
        original(self, device_type, dtype=dtype_, enabled=enabled, cache_enabled=cache_enabled)

    # Queries answer for "cuda" from the CPU state that stands in for it (HF code asks
    # torch.is_autocast_enabled() and torch.get_autocast_dtype("cuda") to pick a branch).
    queries = {name: getattr(torch, name) for name in
               ("is_autocast_enabled", "get_autocast_dtype", "get_autocast_gpu_dtype")}

    def is_autocast_enabled(device_type=None):
        device = "cpu" if device_type in (None, "cuda") else device_type
        return queries["is_autocast_enabled"](device)

    def get_autocast_dtype(device_type):
        return queries["get_autocast_dtype"]("cpu" if device_type == "cuda" else device_type)

    def get_autocast_gpu_dtype():
        return queries["get_autocast_dtype"]("cpu")

    cls.__init__ = __init__
    patched = {"is_autocast_enabled": is_autocast_enabled, "get_autocast_dtype": get_autocast_dtype,
               "get_autocast_gpu_dtype": get_autocast_gpu_dtype}
    for name, fn in patched.items():
        setattr(torch, name, fn)
    try:
        yield
    finally:
        cls.__init__ = original
        for name, fn in queries.items():
            setattr(torch, name, fn)


@contextlib.contextmanager
def cuda_rules_on_cpu(dtype: torch.dtype, on_banned=None):
    """Inside this context, CPU autocast applies CUDA autocast's op policy.

    ``on_banned(op_name)`` is called for ops CUDA autocast refuses; without it they
    raise the same RuntimeError CUDA does.
    """
    on_banned = on_banned or _raise_banned
    lib = torch.library.Library("aten", "IMPL")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "Overriding a previously registered kernel"
        for name in _cpu_autocast_ops():
            if name not in POLICY:
                # CUDA does not cast this op: skip the key, so composites still decompose
                # into ops that autocast sees (cross_entropy_loss → log_softmax, nll_loss).
                lib.impl(name, torch.library.fallthrough_kernel, "AutocastCPU")
        for name, kind in POLICY.items():
            lib.impl(name, _make_kernel(name, kind, dtype, on_banned), "AutocastCPU")
    try:
        yield
    finally:
        lib._destroy()


@contextlib.contextmanager
def emulated_cuda_autocast(dtype: torch.dtype, on_banned=None):
    """``torch.autocast("cuda", dtype)`` as it would behave, on CPU tensors."""
    with cuda_rules_on_cpu(dtype, on_banned), _autocast_device_redirect(dtype), \
            warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with torch.autocast("cpu", dtype=dtype):
            yield


def autocast_policy(target, device: str, on_banned=None):
    """The context a forward runs under for ``target`` on ``device``: none in pure mode (the
    model itself is low), CUDA's autocast emulated on CPU for "cpu-emulated", else
    ``torch.autocast(device)``. Capture and check run their forwards under this one policy."""
    if target.mode == "pure":
        return contextlib.nullcontext()
    if device == "cpu-emulated":
        return emulated_cuda_autocast(target.torch_dtype, on_banned)
    return torch.autocast(device, dtype=target.torch_dtype)
