"""PA115 mixed-dtype-operands: a GEMM or convolution given operands of two float dtypes."""
from __future__ import annotations

from ..registry import Hit, check

FLOATING = ("float16", "bfloat16", "float32", "float64")


@check
def mixed_dtype_operands(graph, name, node, target):
    if target.mode == "autocast" and node["autocast_enabled"]:
        return None  # autocast casts every operand of a GEMM or convolution to one dtype
    dtypes = sorted({d for d in node["in_dtypes"] if d in FLOATING}, key=FLOATING.index)
    if len(dtypes) < 2:
        return None
    refusal = ('"Input type and weight type should be the same"' if node["op"].startswith("conv")
               else '"expected m1 and m2 to have the same dtype"')
    where = "" if target.mode == "pure" else " inside autocast(enabled=False)"
    return Hit(name, {"dtypes": " and ".join(dtypes), "where": where, "refusal": refusal})
