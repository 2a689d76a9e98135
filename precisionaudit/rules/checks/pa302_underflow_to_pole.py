"""PA302 underflow-to-pole: measured values (--data) that flush to 0 in the low dtype before
a division or a log. Without --data nodes carry no measurement and it finds nothing.

Which values round to 0 is read from the fp32 reference (the run under the target only
holds the zeros); whether the pole meets them, from the run under the target: where that
run's pole result stays finite on the same batches (the program that runs adds an eps under
fp16, or never stores the value low), the prediction is not what runs, and it is silent.
"""
from __future__ import annotations

from ...core.numerics import SMALLEST_SUBNORMAL
from ...ir.graph import consumers
from ..registry import Fix, Hit, check
from .low_dtype import low_dtype_of
from .plan_region import common_module, number


#: ops to which an input of exactly 0 is a pole: (op, the input position that must not be 0;
#: None = any). ``rdiv`` is ``1 / x``. Library norms (layer_norm, F.normalize) add an eps
#: before dividing and are guarded: not listed.
POLES = {"div": 1, "rdiv": 0, "reciprocal": None, "rsqrt": None, "log": None, "log2": None,
         "log10": None}


def _stored_low(graph, producer, consumer) -> str | None:
    """The low dtype the value from ``producer`` is held in when ``consumer`` reads it: the
    producer's result dtype, or the consumer's compute dtype if it casts the value down."""
    return low_dtype_of(graph.nodes[producer].get("out_dtype")) or \
        low_dtype_of(graph.nodes[consumer].get("compute_dtype"))


@check
def underflow_to_pole(graph, name, node, target):
    """An op whose measured result has non-zero values that round to 0 in the low dtype it
    is held in, read by an op for which 0 is a pole (a divisor, log, rsqrt, reciprocal).
    Reported at the op whose result flushes, naming the op it feeds."""
    measured = node.get("calibration")
    m = measured.stats if measured else None
    if not m or not m.get("flushed"):
        return None
    for consumer in consumers(graph, name):
        c = graph.nodes[consumer]
        position = POLES.get(c["op"], -1)
        if position == -1 or (position is not None and graph.edges[name, consumer].get("arg", 0) != position):
            continue
        dtype = _stored_low(graph, name, consumer)
        fed = c.get("calibration")
        if dtype is None or (fed and fed.target is not None and not fed.target.get("nonfinite")):
            continue
        return Hit(name, {"measured": number(m["min_nonzero"]), "measured_text": f"{m['min_nonzero']:.3g}",
                        "flushed": round(m["flushed"], 6), "flushed_text": f"{m['flushed']:.2%}",
                        "batch": m["min_batch"], "stored": dtype,
                        "limit": SMALLEST_SUBNORMAL[dtype] / 2,
                        "consumer": consumer, "consumer_op": c["op"], "consumer_line": c.get("line"),
                        "chain": [consumer], "back_in_range": [consumer],
                        "first_nonfinite": bool((fed and fed.nonfinite_first) or measured.nonfinite_first),
                        "fix_module": common_module(graph, [name, consumer])},
                   fix=Fix(ops=tuple(dict.fromkeys([node["op"], c["op"]]))))
    return None
