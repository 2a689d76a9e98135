"""PA205 fp32-gemm: a large GEMM runs in fp32 (plan, explicit cast, disabled autocast)."""
from __future__ import annotations

import math

from ..registry import Hit, check, param


@check
def fp32_gemm(graph, name, node, target):
    if node["compute_dtype"] != "float32":
        return None
    weights = [math.prod(s) for _, s in node["params"] if s and len(s) == 2]
    if weights and weights[0] >= param("min_weight_elements"):
        return Hit(name, {"weight_elements": weights[0], "why": node["precision"].why})
    if not weights and node["op"] in ("matmul", "bmm") and len(node["in_shapes"]) >= 2:
        a, b = node["in_shapes"][:2]
        if a and b and None not in a and b[-1] is not None and math.prod(a) * b[-1] >= (1 << 27):
            return Hit(name, {"flops": 2 * math.prod(a) * b[-1], "why": node["precision"].why})
    return None
