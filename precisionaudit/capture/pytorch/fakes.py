"""Fake kernels torch gets wrong, replaced for the fake-tensor capture.

``aten::_grouped_mm`` (``F.grouped_mm``, transformers' MoE experts): torch's meta kernel
(``torch/_meta_registrations.py``, ``_meta_grouped_mm_common``) still demands bf16 inputs,
as the first CUDA kernel did, so an fp32 or fp16 MoE "fails" on fake tensors. The kernels
that run take any float dtype: ``aten/src/ATen/native/cuda/GroupedBlas.cpp`` uses the
CUTLASS bf16 kernel when it can and ``_grouped_mm_fallback`` (a loop of mm/bmm) otherwise,
and the CPU kernel is that same fallback. The replacement keeps torch's output shapes and
strides (``_create_grouped_mm_output_tensor``) and drops only the bf16 check.

``copy.deepcopy`` of a fake tensor (transformers' Dory copies its cache layers): torch's
``Tensor.__deepcopy__`` clones the storage and ``set_``s it into a new tensor, which a fake
tensor refuses ("Attempted to set the storage of a tensor on device meta to a storage on
different device cpu"). A real tensor's deepcopy is a new tensor with the same values, grad
flag and shape; a fake one's is its clone, made so.
"""
from __future__ import annotations

import functools
import inspect

import torch


def _grouped_mm_fake(mat_a, mat_b, offs=None, bias=None, out_dtype=None):
    from torch._meta_registrations import _create_grouped_mm_output_tensor

    torch._check(mat_a.dim() in (2, 3) and mat_b.dim() in (2, 3),
                 lambda: f"grouped_mm: multiplicands must be 2D or 3D, got {mat_a.dim()}D and {mat_b.dim()}D")
    torch._check(mat_a.dtype == mat_b.dtype and mat_a.is_floating_point(),
                 lambda: f"grouped_mm: expected two float tensors of one dtype, got {mat_a.dtype} and {mat_b.dtype}")
    return _create_grouped_mm_output_tensor(mat_a, mat_b, offs, out_dtype)


def _deepcopy_fake(self, memo):
    if id(self) in memo:
        return memo[id(self)]
    with torch.no_grad():
        copied = self.clone()
    if self.requires_grad:
        copied.requires_grad_()
    memo[id(self)] = copied
    return copied


@functools.cache
def register_fakes() -> None:
    """Register the corrected fakes once per process (they describe torch's real kernels)."""
    from torch._subclasses.fake_tensor import FakeTensor

    if "__deepcopy__" not in vars(FakeTensor):
        FakeTensor.__deepcopy__ = _deepcopy_fake
    if hasattr(torch.ops.aten, "_grouped_mm"):
        try:
            from torch._meta_registrations import _create_grouped_mm_output_tensor  # noqa: F401
        except ImportError:  # a torch whose meta kernel has no shape helper to reuse
            return
        # torch 2.11 defaults allow_override to False (2.13: True), and refuses then to replace
        # the meta kernel its CUDA builds register in C++ (seen on an H200, torch 2.11+cu130)
        override = ({"allow_override": True}
                    if "allow_override" in inspect.signature(torch.library.register_fake).parameters else {})
        try:
            torch.library.register_fake("aten::_grouped_mm", _grouped_mm_fake, **override)
        except RuntimeError:  # a torch that keeps its own fake: a non-bf16 MoE then captures eagerly
            return
