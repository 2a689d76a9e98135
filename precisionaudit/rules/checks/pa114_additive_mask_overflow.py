"""PA114 additive-mask-overflow: scores + a mask near the dtype's most negative value reach
-inf before a softmax; judged on the values that reach the addition (analysis/ranges.py).
"""
from __future__ import annotations

import math

from ...analysis.facts import fact
from ...core.numerics import LARGEST_FINITE, UNIT_ROUNDOFF, rounds_to
from ...core.numerics import LOW_PRECISION_NAMES as LOW
from ...ir.graph import consumers, producers
from ..registry import Hit, check, param


#: ops that carry an additive mask's sum on to the softmax (and more masks or biases added)
TO_SOFTMAX = {"to", "float", "half", "type_as", "view", "reshape", "contiguous", "clone", "getitem",
              "dropout", "add", "sub", "mul", "div", "expand", "transpose", "permute"}


#: ops that put a finite floor under the sum before the softmax: the -inf is gone again
#: (transformers' old ``torch.max(attn_weights, torch.tensor(torch.finfo(dtype).min))``)
FLOOR_ATENS = ("clamp", "maximum", "max.other")


def _floors(node) -> bool:
    if not any(a in node["target"] for a in FLOOR_ATENS):
        return False
    low = fact(node, "range.value_range")
    return bool(node["scalars"]) or (low is not None and low[0] > -math.inf)


def _softmax_reached(graph, name, depth=6):
    """The softmax the op's result reaches through casts, views and more additions without
    a floor on the way, or None."""
    for use in consumers(graph, name):
        node = graph.nodes[use]
        if node["op"] in ("softmax", "log_softmax"):
            return use
        if depth and node["op"] in TO_SOFTMAX and not _floors(node):
            found = _softmax_reached(graph, use, depth - 1)
            if found:
                return found
    return None


#: comparisons that, between two index tensors, give a causal or windowed mask (kv <= q)
ORDERS = {"le", "lt", "ge", "gt"}


def _varies_by_query(graph, mask, hops=16) -> bool:
    """The mask is causal or banded (tril/triu, or an order comparison of two tensors such as
    transformers' ``kv_idx <= q_idx``): joined with left padding, some query rows are masked
    entirely. A key-padding mask alone masks a whole row only where every key is padding."""
    seen, todo = set(), [mask]
    while todo and len(seen) < hops * 4:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        node = graph.nodes[name]
        preds = producers(graph, name)
        if node["op"] in ("tril", "triu") or (node["op"] in ORDERS and len(preds) == 2):
            return True
        todo.extend(preds)
    return False


def _operands(graph, name, node):
    """The ranges of a binary op's two operands in argument order (None: nothing bounds it)."""
    preds = producers(graph, name)
    ranges = [fact(graph.nodes[p], "range.value_range") for p in preds]
    ranges += [None] * (len(node["params"]) + len(node.get("sources", ())))
    ranges += [(float(v), float(v)) for _, v in node["scalars"]
               if isinstance(v, (int, float)) and not isinstance(v, bool)]
    return ranges if len(ranges) == 2 else None


@check
def additive_mask_overflow(graph, name, node, target):
    """scores + mask stored in fp16/bf16, where the mask's values are so close to the dtype's
    most negative finite value that negative scores push the sum to -inf before a softmax."""
    dtype = node["out_dtype"]
    if dtype not in LOW or node["compute_dtype"] not in LOW:
        return None  # an fp32 mask promotes the addition to fp32 (transformers under autocast)
    operands = _operands(graph, name, node)
    if operands is None:
        return None
    reach = param("unknown_reach")
    # the mask: an operand the range pass bounds whose lowest value fits the dtype (one that
    # does not is PA107's); the other operand, when nothing bounds it, reaches -unknown_reach
    known = sorted((i for i, r in enumerate(operands) if r is not None), key=lambda i: operands[i][0])
    for i in known:  # the most negative first: soft-capped scores in [-50, 50] are no mask
        mask, other = operands[i], operands[1 - i]
        if not math.isfinite(mask[0]) or rounds_to(mask[0], dtype) == -math.inf:
            continue
        if node["op"] == "sub" and i == 1:
            lowest, other_low = -mask[1], (other or (-reach, reach))[0]
        elif node["op"] == "sub":
            lowest, other_low = mask[0], -(other or (-reach, reach))[1]
        else:
            lowest, other_low = mask[0], (other or (-reach, reach))[0]
        if other_low >= 0 or rounds_to(lowest + other_low, dtype) != -math.inf:
            continue
        preds = producers(graph, name)
        if i < len(preds) and not _varies_by_query(graph, preds[i]):
            return None  # a padding-only mask masks a whole row only for a sequence of padding
        softmax = _softmax_reached(graph, name)
        if softmax is None:
            return None
        below = -(LARGEST_FINITE[dtype] + _half_ulp_at_max(dtype) + lowest)  # the other's values that overflow
        return Hit(name, {"mask_low": lowest, "mask_low_text": f"{lowest:g}", "overflow_below": below,
                          "overflow_below_text": f"{below:g}", "softmax": softmax,
                          "softmax_line": graph.nodes[softmax]["line"],
                          "other_range": list(other) if other is not None else None})
    return None


def _half_ulp_at_max(dtype) -> float:
    """Half the spacing of the dtype's largest finite values: sums beyond max + this round to inf."""
    u = UNIT_ROUNDOFF[dtype]  # 2^-(m+1): half an ulp of 1; the largest values' ulp is max * 2u / (2 - 2u)
    return LARGEST_FINITE[dtype] * u / (2 - 2 * u)
