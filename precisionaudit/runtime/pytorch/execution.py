"""Where and under which policy each variant runs.

With a GPU the baseline runs under the real ``torch.autocast("cuda")``. Without one, CPU
autocast is no stand-in (its op lists differ: softmax, layer_norm, sum, exp stay low on
CPU), so the CUDA policy is emulated op by op on CPU tensors (``emulated_cuda_autocast``:
CUDA's casting decisions, exact dtypes), and the low-precision kernels are computed as
the GPU computes them (``emulation.EmulatedKernels``: every op in fp32 arithmetic from the
fp16/bf16 inputs, rounded once to the low dtype; scans and atomic adds in the low dtype),
which is also far faster than CPU's own fp16 GEMMs. Errors are of the right kind and
order, not bit-equal to a GPU's (accumulation order differs).
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass, field

import torch
from torch.utils import _pytree as pytree

from ...core.errors import UsageError
from .cuda_autocast import autocast_policy
from .emulation import EmulatedKernels

DEVICE_CHOICES = ("auto", "cuda", "cpu", "cpu-emulated")
EMULATION_NOTE = ("CUDA's low-precision kernels emulated on CPU: every op that computes runs in float32 "
                  "from the low-precision inputs and is rounded once (CUDA's opmath and float32 "
                  "accumulators; GEMMs and convolutions as tensor cores), never on CPU's own "
                  "float16/bfloat16 kernels; cumsum, cumprod and logcumsumexp are scanned, and "
                  "scatter_add and index_add accumulated, in the low dtype step by step, as CUDA's "
                  "kernels do")


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
    runtime = Runtime("cpu-emulated", "cuda", torch.device("cpu"), [EMULATION_NOTE])
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


def numerics(runtime: Runtime):
    """Context for everything a low-precision variant runs (its backward included)."""
    if runtime.name == "cpu-emulated":
        return EmulatedKernels(runtime.emulated_ops)
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


def _key_name(key) -> str:
    for attr in ("idx", "key", "name"):
        if hasattr(key, attr):
            return str(getattr(key, attr))
    return str(key)


def named_outputs(out) -> list[tuple[str, object]]:
    """[(name, leaf)] of a forward's result, tensors detached (what check.metrics compares):
    the leaves of tuples, dicts, Hugging Face ``ModelOutput``s named by their path ("0",
    "logits", "1.hidden"); a bare tensor is output "0"."""
    leaves, _ = pytree.tree_flatten_with_path(out)
    leaves = [(path, leaf.detach() if isinstance(leaf, torch.Tensor) else leaf) for path, leaf in leaves]
    if len(leaves) == 1 and not leaves[0][0]:
        return [("0", leaves[0][1])]
    return [(".".join(_key_name(k) for k in path) or "0", leaf) for path, leaf in leaves]
