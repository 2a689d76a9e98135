"""Which Linear GEMMs run in FP4 under an FP4 target (``--dtype nvfp4|mxfp4``), which fall back
to bf16 and why, and where each sits in the stack of blocks: one ``Fp4Facts`` record per linear
node, under ``node["fp4"]``.

The conversion, the head, the blocks and the ``--tp`` split are ``linear_gemms``'s (shared with
the FP8 pass). The shapes each recipe quantizes, from the sources:
- NVFP4, Transformer Engine: ``NVFP4Quantizer.is_quantizable`` (``transformer_engine/pytorch/
  tensor/nvfp4_tensor.py``) takes a tensor whose last dim and the product of its other dims are
  multiples of 16: a weight N x K needs K and N divisible by 16 (the tokens, M, are the data's).
- MXFP4, OCP MX: 32-value blocks along the reduced dim; TE's MX quantizer (``MXFP8Quantizer.
  is_quantizable``) asks 32 of both dims, as here.
- torchao's NVFP4 training (``torchao/prototype/moe_training/nvfp4_training/nvfp4_linear.py``,
  ``nvfp4_mm_triton``) raises unless M, K and N are all multiples of 128: recorded beside TE's
  verdict (``torchao_training``).
Nothing is written without an FP4 target.
"""
from __future__ import annotations

from ..core.numerics import FP4_FORMATS, TORCHAO_NVFP4_MULTIPLE
from .facts import Fp4Facts
from .fp8 import dims_fallback
from .linear_gemms import judged_gemms


def multiple_of(fmt: str) -> int:
    """The multiple K and N must have for ``fmt``'s GEMM: its scale block (16, 32)."""
    return FP4_FORMATS[fmt]["block"]


def annotate(graph):
    target = graph.graph.get("target")
    fmt = getattr(target, "fp4", None)
    if not fmt:
        return
    multiple = multiple_of(fmt)
    what = f"{fmt.upper()} GEMMs"
    for name, node, shape, split, k, n, stack in judged_gemms(graph):
        fallback = shape.not_converted or dims_fallback(k, n, multiple, what, target.tp)
        torchao = None
        if fmt == "nvfp4" and k is not None and n is not None:
            torchao = not k % TORCHAO_NVFP4_MULTIPLE and not n % TORCHAO_NVFP4_MULTIPLE
        block = stack.index_of(node["module"]) if stack is not None else None
        node["fp4"] = Fp4Facts(format=fmt, convertible=shape.convertible, runs_fp4=not fallback, fallback=fallback,
                               k=k, n=n, m=shape.m, multiple=multiple, torchao_training=torchao, split=split,
                               output_head=shape.output_head, tied_to=shape.tied_to,
                               stack=stack.path if stack else None, blocks=stack.blocks if stack else None,
                               block=block, full_k=shape.k, full_n=shape.n)
