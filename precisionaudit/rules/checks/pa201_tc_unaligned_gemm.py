"""PA201 tc-unaligned-gemm: a GEMM dim fixed by the model is not a multiple of 8 (fp16/bf16)."""
from __future__ import annotations

from ...analysis.facts import fact
from ..registry import Hit, check, param
from .gemm_shapes import ALIGN, VOCAB_MIN, gemm_dims, padded


@check
def tc_unaligned_gemm(graph, name, node, target):
    if not node["precision"].low_precision:
        return None
    share = fact(node, "work.site_share")
    if node["op"] == "linear" and share is not None and share < param("min_work_share"):
        return None  # padding it cannot speed the model up by more than its share
    multiple = ALIGN[target.dtype]
    for dim, size in gemm_dims(graph, node, name):
        if dim.startswith("N (") and size >= VOCAB_MIN:
            continue  # vocabulary-sized: PA202 judges it against 64
        if size % multiple:
            up, waste = padded(size, multiple)
            return Hit(name, {"dim": dim, "size": size, "multiple": multiple, "padded": up, "waste_pct": waste})
    return None
