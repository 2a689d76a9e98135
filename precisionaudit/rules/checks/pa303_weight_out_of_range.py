"""PA303 weight-out-of-range: real weights (--weights) that do not fit the low dtype an op reads them in."""
from __future__ import annotations

from ...core.numerics import LARGEST_FINITE
from ..registry import Fix, Hit, check, param
from .low_dtype import low_dtype_of
from .plan_region import number


@check
def weight_out_of_range(graph, target):
    """Parameters (real weights, --weights) that do not fit the low dtype an op reads them
    in: values above its max become inf; a share of non-zero values below half its
    smallest subnormal become 0. One finding per parameter, at the first op that reads it
    in the low dtype (under autocast: a GEMM/conv that casts it; LayerNorm weights stay fp32)."""
    stats = graph.graph.get("weight_ranges") or {}
    seen, hits = set(), []
    for name, node in graph.nodes(data=True):
        dtype = low_dtype_of(node.get("compute_dtype"))
        if dtype is None:
            continue
        for weight, _shape in node.get("params") or ():
            s = stats.get(weight)
            if s is None or weight in seen:
                continue
            if s["max_abs"] > LARGEST_FINITE[dtype]:
                value, text, case, what = s["max_abs"], f"{s['max_abs']:.4g}", None, "becomes inf"
            elif s["flushed"] >= param("flushed_share"):
                value, text, case = s["min_nonzero"], f"{s['min_nonzero']:.3g}", "flushed"
                what = f"has {s['flushed']:.2%} of its values become 0"
            else:
                continue
            seen.add(weight)
            hits.append(Hit(name, {"param": weight, "measured": number(value), "measured_text": text,
                                   "what": what, "stored": dtype,
                                   "max_abs": number(s["max_abs"]), "flushed": round(s["flushed"], 6)},
                            case=case, fix=Fix(ops=(node["op"],))))
    return hits
