"""PA105 exp-log-low-precision: exp/log/pow/reciprocal in fp16/bf16, judged on the values
that can reach the op (analysis/ranges.py), not on its dtype alone.
"""
from __future__ import annotations

import math

from ...analysis.facts import fact
from ...core.numerics import LARGEST_FINITE, SMALLEST_NORMAL
from ...core.numerics import LOW_PRECISION_NAMES as LOW
from ...ir.graph import consumers, producers
from ..registry import Hit, check


#: functions that map +-inf to their finite limit: an overflow feeding only them is harmless
SATURATING = {"tanh", "sigmoid", "erf", "hardtanh", "softsign"}


#: the smallest argument each op keeps its range on: log and its kin lose a subnormal's
#: digits; reciprocal and rsqrt overflow below 1/max and 1/max^2 (rsqrt(1e-5) is 316)
FLOORS = {"log": SMALLEST_NORMAL.get, "log2": SMALLEST_NORMAL.get, "log10": SMALLEST_NORMAL.get,
          "reciprocal": lambda dtype: 1 / LARGEST_FINITE[dtype],
          "rsqrt": lambda dtype: LARGEST_FINITE[dtype] ** -2}


#: monotone steps between an overflowing op and the saturating function (gelu-tanh:
#: tanh(c * (x + 0.044715 * x**3)))
MONOTONE = {"add", "mul", "to", "float", "half"}


def _argument_range(graph, name):
    preds = producers(graph, name)
    node = graph.nodes[name]
    if len(preds) != 1 or node["params"] or node.get("sources"):
        return None
    return fact(graph.nodes[preds[0]], "range.value_range")


def _saturates(graph, name, depth=4) -> bool:
    """Every use of the output ends in tanh/sigmoid/erf through adds and positive scalings."""
    uses = consumers(graph, name)
    if not uses or depth == 0:
        return False
    for use in uses:
        node = graph.nodes[use]
        if node["op"] in SATURATING:
            continue
        scales = [v for _, v in node["scalars"] if isinstance(v, (int, float))]
        if node["op"] not in MONOTONE or any(v < 0 for v in scales) \
                or not _saturates(graph, use, depth - 1):
            return False
    return True


def _scalar_parameter(node) -> bool:
    """exp of a one-element learned parameter (CLIP's 0-d logit_scale, SigLIP's of shape (1,)):
    a trained temperature, not an activation."""
    return len(node["params"]) == 1 and len(node["in_dtypes"]) == 1 and math.prod(node["params"][0][1]) == 1


def _root_exponent(node) -> bool:
    """pow with a constant exponent in (0, 1]: |x| ** p <= max(1, |x|)."""
    exponents = [v for op, v in node["scalars"] if op == "pow" and isinstance(v, (int, float))
                 and not isinstance(v, bool)]
    return bool(exponents) and all(0 < e <= 1 for e in exponents)


@check
def exp_log_low_precision(graph, name, node, target):
    """exp/pow/log/reciprocal whose argument can leave the stored dtype's range."""
    dtype = node["compute_dtype"]
    if dtype not in LOW:
        return None
    op, limit = node["op"], LARGEST_FINITE[dtype]
    arg = _argument_range(graph, name)
    out = fact(node, "range.value_range")
    if op == "softplus":
        return None  # ActivationSoftplusKernel.cu: opmath, and x itself above the threshold
    if op in ("exp", "expm1", "pow") and out is not None and max(abs(out[0]), abs(out[1])) <= limit:
        return None  # the argument is bounded and the result fits
    if op in ("exp", "expm1") and _scalar_parameter(node):
        return None
    if op == "pow" and _root_exponent(node):
        return None  # x ** 0.5 (a norm's sqrt) is smaller than x for x >= 1: it cannot overflow
    if op in ("exp", "expm1", "pow") and _saturates(graph, name):
        return None  # inf only drives a tanh/sigmoid to its limit (gelu-tanh's x**3)
    if op in FLOORS and arg is not None and arg[0] >= FLOORS[op](dtype):
        return None  # bounded away from 0
    if op == "log1p" and arg is not None and arg[0] > -1 + 1e-3:
        return None
    if op in ("exp", "expm1"):
        problem = f"overflows {dtype} for arguments above {math.log(limit):.2f}"
    elif op == "pow":
        problem = f"overflows {dtype} (max {limit:.4g}) for large bases"
    elif op in ("reciprocal", "rsqrt"):
        problem = f"overflows {dtype} for arguments below {FLOORS[op](dtype):.2g}"
    else:
        problem = f"loses range near 0 in {dtype}"
    if arg is not None and math.isinf(arg[1]) and op in FLOORS:
        problem += f", and its argument itself overflows {dtype} (up to inf)"  # DETR's log(x1 / x2)
    arguments = "values nothing bounds" if arg is None else f"values in [{arg[0]:.4g}, {arg[1]:.4g}]"
    return Hit(name, {"problem": problem, "arguments": arguments,
                      **({"argument_range": list(arg)} if arg is not None else {})})
