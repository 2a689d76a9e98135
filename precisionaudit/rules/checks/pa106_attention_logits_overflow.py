"""PA106 attention-logits-overflow: a matmul producing softmax logits stores them in fp16
while part of their 1/sqrt(d) scale comes only after it.
"""
from __future__ import annotations

from ...analysis.facts import fact
from ..registry import Hit, check, param


@check
def attention_logits_overflow(graph, name, node, target):
    """fp16-stored logits that are scaled down after the GEMM while less than the 1/sqrt(d)
    they need was applied before it (to q, k or as baddbmm's alpha, which cuBLAS applies to
    the fp32 accumulator). bf16 has fp32's range; logits of normalised q/k have a value range
    that fits; a scale of unknown value before the GEMM is taken to do its job."""
    logits = node.get("attention")
    if node["out_dtype"] != "float16" or fact(node, "range.value_range") is not None or not (logits and logits.feeds_softmax):
        return None
    before, after, d = logits.scale_before, logits.scale_after, logits.head_dim
    if (after is not None and abs(after) >= 1) or before is None:
        return None  # nothing shrinks the logits after the GEMM, or an unknown scale before it
    needed = d ** -0.5 if d else None
    if before != 1 and (needed is None or abs(before) <= needed * (1 + param("tolerance"))):
        return None
    return Hit(name, {"softmax": logits.feeds_softmax, "scale_before": before, "scale_after": after,
                      "head_dim": d, "scale_needed": needed, "scales": _scales_text(before, after, d, needed)})


def _scales_text(before, after, d, needed) -> str:
    first = "no scale before it" if before == 1 else f"x{before:.4g} applied before it"
    rest = "a scale of unknown value" if after is None else f"x{after:.4g}"
    need = f" (1/sqrt({d}) = {needed:.4g} belongs before it)" if needed else ""
    return f"with {first} and {rest} left after it{need}"
