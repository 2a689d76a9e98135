"""PA116 norm-offset-scale-low-precision: a norm's scale ``1 + weight`` held in fp16/bf16.

The scale is rounded wherever it is first held in fp16/bf16: formed there (a pure bf16
Gemma RMSNorm's ``output * (1 + self.weight)``), or formed in fp32 and cast down before it
scales (Nemotron's ``LayerNorm1P``: ``weight + 1`` in fp32, cast to the autocast dtype by
``_cast_if_autocast_enabled``, then ``F.layer_norm``'s weight).
"""
from __future__ import annotations

from ...analysis.facts import fact
from ...core.numerics import LOW_PRECISION_NAMES as LOW
from ...ir.graph import consumers, producers
from ..registry import Fix, Hit, check

#: the distance between neighbouring numbers in [1, 2): 2^-(stored significand bits)
STEP_NEAR_ONE = {"bfloat16": 2.0 ** -7, "float16": 2.0 ** -10}
#: ops that pass a normalised value on unchanged in meaning (casts, views, a second factor)
CARRY = {"to", "float", "half", "bfloat16", "type_as", "view", "reshape", "mul"}
#: ops that hand the scale on unchanged but for its dtype
PASS_ON = CARRY - {"mul"}
NORM_OPS = {"layer_norm", "rms_norm", "group_norm"}


@check
def norm_offset_scale_low_precision(graph, name, node, target):
    params, ones = node["params"], [v for _, v in node["scalars"] if v == 1]
    if len(params) != 1 or len(params[0][1]) != 1 or not ones:
        return None
    use = _scaling_use(graph, name, [node["out_dtype"]] if node["out_dtype"] in LOW else [])
    if use is None:
        return None
    dtype, consumer = use
    step = STEP_NEAR_ONE[dtype]
    formed = f"formed in {dtype}" if node["out_dtype"] == dtype else \
        f"formed in {node['out_dtype']}, then cast to {dtype} before the {graph.nodes[consumer]['op']}"
    product = f", and the normalised values are multiplied in {dtype} too" \
        if graph.nodes[consumer]["op"] == "mul" else ""
    # formed in fp32 and cast down by the model's own code (``if torch.is_autocast_enabled():``):
    # only the whole module in fp32 (autocast off there) keeps the cast from happening
    fix = Fix() if node["out_dtype"] == dtype else Fix(ops=())
    return Hit(name, {"param": params[0][0], "step": f"{step:.2g}", "half_step": f"{step / 2:.2g}",
                      "formed": formed, "product": product, "scaled_by": graph.nodes[consumer]["op"]},
               fix=fix)


def _scaling_use(graph, name, low, depth=4):
    """(the fp16/bf16 dtype the scale is held in, the op it scales with) when ``name``'s value,
    through casts and views, multiplies a normalised value or is a norm op's weight, having
    been held in fp16/bf16 on the way (``low``: the dtypes so far); else None."""
    for use in consumers(graph, name):
        node = graph.nodes[use]
        if low and _scales(graph, name, use):
            return low[0], use
        if depth and node["op"] in PASS_ON:
            found = _scaling_use(graph, use, low + ([node["out_dtype"]] if node["out_dtype"] in LOW else []),
                                 depth - 1)
            if found:
                return found
    return None


def _scales(graph, scale, use) -> bool:
    """``use`` multiplies a normalised value by ``scale``, or is a norm op taking it as weight."""
    node = graph.nodes[use]
    if node["op"] == "mul":
        return any(_normalised(graph, p) for p in producers(graph, use) if p != scale)
    return node["op"] in NORM_OPS and graph.edges[scale, use].get("arg", 0) > 0


def _normalised(graph, name, depth=4) -> bool:
    """Whether ``name``'s value is a normalised one: an rsqrt of a variance or a norm op's
    output, through casts, views and products."""
    node = graph.nodes[name]
    if node["op"] in NORM_OPS or fact(node, "norm.pattern") == "rsqrt of a variance":
        return True
    return depth > 0 and node["op"] in CARRY and any(_normalised(graph, p, depth - 1) for p in producers(graph, name))
