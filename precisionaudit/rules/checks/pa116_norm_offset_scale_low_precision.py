"""PA116 norm-offset-scale-low-precision: a norm's scale ``1 + weight`` formed in fp16/bf16."""
from __future__ import annotations

from ...analysis.facts import fact
from ...ir.graph import consumers, producers
from ..registry import Hit, check

#: the distance between neighbouring numbers in [1, 2): 2^-(stored significand bits)
STEP_NEAR_ONE = {"bfloat16": 2.0 ** -7, "float16": 2.0 ** -10}
#: ops that pass a normalised value on unchanged in meaning (casts, views, a second factor)
CARRY = {"to", "float", "half", "bfloat16", "type_as", "view", "reshape", "mul"}
NORM_OPS = {"layer_norm", "rms_norm", "group_norm"}


@check
def norm_offset_scale_low_precision(graph, name, node, target):
    params, ones = node["params"], [v for _, v in node["scalars"] if v == 1]
    if len(params) != 1 or len(params[0][1]) != 1 or not ones:
        return None
    if not any(graph.nodes[c]["op"] == "mul" and any(_normalised(graph, p) for p in producers(graph, c) if p != name)
               for c in consumers(graph, name)):
        return None
    step = STEP_NEAR_ONE[node["compute_dtype"]]
    return Hit(name, {"param": params[0][0], "step": f"{step:.2g}", "half_step": f"{step / 2:.2g}"})


def _normalised(graph, name, depth=4) -> bool:
    """Whether ``name``'s value is a normalised one: an rsqrt of a variance or a norm op's
    output, through casts, views and products."""
    node = graph.nodes[name]
    if node["op"] in NORM_OPS or fact(node, "norm.pattern") == "rsqrt of a variance":
        return True
    return depth > 0 and node["op"] in CARRY and any(_normalised(graph, p, depth - 1) for p in producers(graph, name))
