"""PA601 fp8-gemm-dims: an nn.Linear whose K or N is not a multiple of 16 (32 for MXFP8)."""
from __future__ import annotations

from ..registry import Hit, check
from .fp8_gemms import fp8_values


@check
def fp8_gemm_dims(graph, name, node, target):
    facts = node.get("fp8")
    if facts is None or facts.runs_fp8 or not facts.convertible or facts.k is None or facts.n is None:
        return None  # an F.linear call or a Conv1D's addmm stays bf16 whatever its size
    if not facts.k % facts.multiple and not facts.n % facts.multiple:
        return None
    if facts.output_head:
        instead = "as the output head it belongs in bf16 anyway (PA602): leave it out of the FP8 conversion"
        return Hit(name, {**fp8_values(node, target), "instead": instead}, case="output-head")
    instead = f"pad it to {facts.padded_n}x{facts.padded_k} to run it in FP8"
    return Hit(name, {**fp8_values(node, target), "instead": instead}, case="hidden-layer")
