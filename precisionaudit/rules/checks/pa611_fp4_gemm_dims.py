"""PA611 fp4-gemm-dims: an nn.Linear whose per-rank K or N is not a multiple of the FP4 block."""
from __future__ import annotations

from ...core.numerics import TORCHAO_NVFP4_MULTIPLE as TORCHAO
from ..registry import Hit, check
from .fp4_gemms import fp4_values


@check
def fp4_gemm_dims(graph, name, node, target):
    facts = node.get("fp4")
    if facts is None or not facts.convertible or facts.k is None or facts.n is None:
        return None  # an F.linear call or a Conv1D's addmm stays bf16 whatever its size
    fmt = facts.format.upper()
    values = fp4_values(node, target)
    if facts.runs_fp4:
        if facts.torchao_training is not False or facts.output_head:
            return None
        padded = f"{-(-facts.n // TORCHAO) * TORCHAO}x{-(-facts.k // TORCHAO) * TORCHAO}"
        return Hit(name, {**values, "why": "Transformer Engine runs it in NVFP4, but torchao's NVFP4 training path "
                                          "(nvfp4_mm_triton) needs M, K and N all divisible by 128",
                          "instead": f"under torchao leave it out of quantize_ (plan --dtype nvfp4's filter_fn does) "
                                     f"or pad it to {padded}", "keep": False}, case="torchao-only")
    why = f"{fmt} needs K and N divisible by {facts.multiple}, so it runs in bf16 instead"
    if facts.output_head:
        return Hit(name, {**values, "why": why, "instead": "as the output head it belongs in bf16 anyway (PA612): "
                                                          "leave it out of the FP4 conversion", "keep": True},
                   case="output-head")
    return Hit(name, {**values, "why": why, "instead": f"pad it to {facts.padded_n}x{facts.padded_k} to run it in {fmt}",
                      "keep": True}, case="hidden-layer")
