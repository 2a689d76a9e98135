"""PA301 activation-overflow: an op's measured result (--data) does not fit its low dtype.
Without --data nodes carry no measurement and it finds nothing.
"""
from __future__ import annotations

import math

from ...core.numerics import LARGEST_FINITE
from ...ir.graph import consumers, producers
from ..registry import Fix, Hit, check
from .low_dtype import low_dtype
from .plan_region import common_module, number


def _hot(graph, node, dtype) -> bool:
    """Measured within the headroom of ``dtype``'s max. A value that is inf/NaN in the fp32
    reference itself is the model's own problem, not the low dtype's: not judged."""
    measured = node.get("calibration")
    m = measured.stats if measured else None
    return bool(m) and math.isfinite(m["max_abs"]) and \
        m["max_abs"] * graph.graph.get("headroom", 2.0) >= LARGEST_FINITE[dtype]


@check
def activation_overflow(graph, name, node, target):
    """An op whose measured result does not fit (or barely fits) the low dtype it is stored
    in, reported where it starts: not at ops that inherit it from a low-precision producer."""
    measured = node.get("calibration")
    m = measured.stats if measured else None
    dtype = low_dtype(node)
    if not m or dtype is None:
        return None
    limit = LARGEST_FINITE[dtype]
    big_inputs = [p for p in producers(graph, name) if _hot(graph, graph.nodes[p], dtype)]
    if _hot(graph, node, dtype):
        if any(low_dtype(graph.nodes[p]) == dtype for p in big_inputs):
            return None  # inherited: the producer's finding and plan chain cover this op
        value, where = m["max_abs"], "result"
        batch = m["batch"]
    elif node.get("compute_dtype") == dtype and any(low_dtype(graph.nodes[p]) != dtype
                                                     for p in big_inputs):
        # an fp32 value (kept fp32 by hand, like T5's wo) cast down to fp16 here
        big_inputs = [p for p in big_inputs if low_dtype(graph.nodes[p]) != dtype]
        source = graph.nodes[big_inputs[0]]["calibration"].stats
        value, where, batch = source["max_abs"], f"input (from {big_inputs[0]})", source["batch"]
    else:
        return None
    chain = overflow_chain(graph, name, dtype)
    nodes = [name, *chain]
    fix_module = common_module(graph, nodes)
    own = node.get("module", "")
    # a module that is nothing but this op (T5's ``wo``): the plan names it whole, as
    # ``_keep_in_fp32_modules`` does, and the chain's ops around it by op
    whole = (own,) if own != fix_module and _only_op_of(graph, name, own) else ()
    return Hit(name, {"measured": number(value), "measured_text": f"{value:.4g}", "batch": batch,
                      "where": where, "limit": number(limit), "stored": dtype,
                      "first_nonfinite": measured.nonfinite_first,
                      "chain": chain, "back_in_range": [c for c in chain if not _hot(graph, graph.nodes[c], dtype)],
                      "fix_module": fix_module},
               case=None if value > limit else "near",
               fix=Fix(ops=tuple(dict.fromkeys(graph.nodes[n]["op"] for n in (chain if whole else nodes))),
                       whole_modules=whole))


def _only_op_of(graph, name, module) -> bool:
    return all(attrs.get("module", "") != module for n, attrs in graph.nodes(data=True) if n != name)


def overflow_chain(graph, start: str, dtype: str) -> list[str]:
    """Nodes an out-of-range result of ``start`` flows through, up to (and including) the
    first that brings it back in range by the measured values (a norm, a softmax, a scale)."""
    order = {n: i for i, n in enumerate(graph.nodes)}
    seen, chain, frontier = {start}, [], [start]
    while frontier:
        for c in consumers(graph, frontier.pop()):
            if c in seen:
                continue
            seen.add(c)
            chain.append(c)
            if _hot(graph, graph.nodes[c], dtype):
                frontier.append(c)
    return sorted(chain, key=order.get)
