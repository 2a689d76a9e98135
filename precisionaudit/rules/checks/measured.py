"""Checks for the value rules (PA3xx): measured ranges (--data) and real weights (--weights).

They read the facts the range pass leaves: ``node["measured"]`` (fp32 reference statistics
of the op's result over the calibration batches) and ``graph.graph["weight_ranges"]``. A
value is judged in the dtype the op really stores or computes it in under the target
policy (an fp32 softmax under autocast is not an fp16 overflow). Without those facts (no
--data / --weights) the checks find nothing: the static scan stays what it was.
"""
from __future__ import annotations

import math

from ...core.numerics import LARGEST_FINITE, SMALLEST_SUBNORMAL
from ...core.numerics import LOW_PRECISION_NAMES as LOW
from ...ir.graph import consumers, producers
from ..registry import check, param


def _low_dtype(node) -> str | None:
    """The low dtype the op stores its result in (or computes in), if any."""
    for dtype in (node.get("out_dtype"), node.get("compute_dtype")):
        if dtype in LOW:
            return dtype
    return None


def _hot(graph, node, dtype) -> bool:
    """Measured within the headroom of ``dtype``'s max. A value that is inf/NaN in the fp32
    reference itself is the model's own problem, not the low dtype's: not judged."""
    m = node.get("measured")
    return bool(m) and math.isfinite(m["max_abs"]) and \
        m["max_abs"] * graph.graph.get("headroom", 2.0) >= LARGEST_FINITE[dtype]


@check
def activation_overflow(graph, name, node, target):
    """An op whose measured result does not fit (or barely fits) the low dtype it is stored
    in, reported where it starts: not at ops that inherit it from a low-precision producer."""
    m = node.get("measured")
    dtype = _low_dtype(node)
    if not m or dtype is None:
        return None
    limit = LARGEST_FINITE[dtype]
    big_inputs = [p for p in producers(graph, name) if _hot(graph, graph.nodes[p], dtype)]
    if _hot(graph, node, dtype):
        if any(_low_dtype(graph.nodes[p]) == dtype for p in big_inputs):
            return None  # inherited: the producer's finding and plan chain cover this op
        value, where = m["max_abs"], "result"
        batch = m["batch"]
    elif node.get("compute_dtype") == dtype and any(_low_dtype(graph.nodes[p]) != dtype
                                                     for p in big_inputs):
        # an fp32 value (kept fp32 by hand, like T5's wo) cast down to fp16 here
        big_inputs = [p for p in big_inputs if _low_dtype(graph.nodes[p]) != dtype]
        source = graph.nodes[big_inputs[0]]["measured"]
        value, where, batch = source["max_abs"], f"input (from {big_inputs[0]})", source["batch"]
    else:
        return None
    chain = overflow_chain(graph, name, dtype)
    nodes = [name, *chain]
    fix_module = common_module(graph, nodes)
    own = node.get("module", "")
    # a module that is nothing but this op (T5's ``wo``): the plan names it whole, as
    # ``_keep_in_fp32_modules`` does, and the chain's ops around it by op
    whole = [own] if own != fix_module and _only_op_of(graph, name, own) else []
    return {"measured": _num(value), "measured_text": f"{value:.4g}", "batch": batch,
            "where": where, "limit": _num(limit), "stored": dtype,
            **({} if value > limit else {"case": "near"}),
            "first_nonfinite": bool(m.get("nonfinite_first")),
            "chain": chain, "back_in_range": [c for c in chain if not _hot(graph, graph.nodes[c], dtype)],
            "fix_module": fix_module, "fix_whole": whole,
            "fix_ops": list(dict.fromkeys(graph.nodes[n]["op"] for n in (chain if whole else nodes)))}


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


def common_module(graph, nodes) -> str:
    """The innermost module containing every node (a plan region must hold the whole chain:
    a region's outputs go back to the low dtype when its module returns)."""
    paths = [graph.nodes[n].get("module", "").split(".") for n in nodes]
    common = []
    for parts in zip(*paths):
        if len(set(parts)) != 1:
            break
        common.append(parts[0])
    return ".".join(p for p in common if p)


def _num(value):
    return None if value is None else float(value)


# --------------------------------------------------------------------------- PA302
#: ops to which an input of exactly 0 is a pole: (op, the input position that must not be 0;
#: None = any). ``rdiv`` is ``1 / x``. Library norms (layer_norm, F.normalize) add an eps
#: before dividing and are guarded: not listed.
POLES = {"div": 1, "rdiv": 0, "reciprocal": None, "rsqrt": None, "log": None, "log2": None,
         "log10": None}


def _stored_low(graph, producer, consumer) -> str | None:
    """The low dtype the value from ``producer`` is held in when ``consumer`` reads it: the
    producer's result dtype, or the consumer's compute dtype if it casts the value down."""
    return _low_dtype_of(graph.nodes[producer].get("out_dtype")) or \
        _low_dtype_of(graph.nodes[consumer].get("compute_dtype"))


def _low_dtype_of(dtype):
    return dtype if dtype in LOW else None


@check
def underflow_to_pole(graph, name, node, target):
    """An op whose measured result has non-zero values that round to 0 in the low dtype it
    is held in, read by an op for which 0 is a pole (a divisor, log, rsqrt, reciprocal).
    Reported at the op whose result flushes, naming the op it feeds."""
    m = node.get("measured")
    if not m or not m.get("flushed"):
        return None
    for consumer in consumers(graph, name):
        c = graph.nodes[consumer]
        position = POLES.get(c["op"], -1)
        if position == -1 or (position is not None and graph.edges[name, consumer].get("arg", 0) != position):
            continue
        dtype = _stored_low(graph, name, consumer)
        if dtype is None:
            continue
        fed = c.get("measured") or {}
        return {"measured": _num(m["min_nonzero"]), "measured_text": f"{m['min_nonzero']:.3g}",
                "flushed": round(m["flushed"], 6), "flushed_text": f"{m['flushed']:.2%}",
                "batch": m["min_batch"], "stored": dtype,
                "limit": SMALLEST_SUBNORMAL[dtype] / 2,
                "consumer": consumer, "consumer_op": c["op"], "consumer_line": c.get("line"),
                "chain": [consumer], "back_in_range": [consumer],
                "first_nonfinite": bool(fed.get("nonfinite_first") or m.get("nonfinite_first")),
                "fix_module": common_module(graph, [name, consumer]),
                "fix_ops": list(dict.fromkeys([node["op"], c["op"]]))}
    return None


# --------------------------------------------------------------------------- PA303
@check
def weights_out_of_range(graph, target):
    """Parameters (real weights, --weights) that do not fit the low dtype an op reads them
    in: values above its max become inf; a share of non-zero values below half its
    smallest subnormal become 0. One finding per parameter, at the first op that reads it
    in the low dtype (under autocast: a GEMM/conv that casts it; LayerNorm weights stay fp32)."""
    stats = graph.graph.get("weight_ranges") or {}
    seen, hits = set(), []
    for name, node in graph.nodes(data=True):
        dtype = _low_dtype_of(node.get("compute_dtype"))
        if dtype is None:
            continue
        for weight, _shape in node.get("params") or ():
            s = stats.get(weight)
            if s is None or weight in seen:
                continue
            if s["max_abs"] > LARGEST_FINITE[dtype]:
                value, text, case, what = s["max_abs"], f"{s['max_abs']:.4g}", {}, "becomes inf"
            elif s["flushed"] >= param("flushed_share"):
                value, text, case = s["min_nonzero"], f"{s['min_nonzero']:.3g}", {"case": "flushed"}
                what = f"has {s['flushed']:.2%} of its values become 0"
            else:
                continue
            seen.add(weight)
            hits.append((name, {"param": weight, "measured": _num(value), "measured_text": text,
                                "what": what, "stored": dtype, **case,
                                "max_abs": _num(s["max_abs"]), "flushed": round(s["flushed"], 6),
                                "fix_ops": [node["op"]]}))
    return hits

