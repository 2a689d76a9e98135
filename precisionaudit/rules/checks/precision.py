"""Checks for the numerical rules (PA1xx)."""
from __future__ import annotations

from ...core.numerics import EXACT_INTEGER_LIMIT
from ...core.numerics import LOW_PRECISION_NAMES as LOW
from ...ir.graph import consumers, producers
from ..engine import param
from . import check


@check
def norm_low_precision(graph, name, node, target):
    """Norm modules (not BatchNorm under autocast) and hand-written norms computing low."""
    if node["op"] == "batch_norm" and target.mode == "autocast":
        return None  # cuDNN/native BN take fp32 weights and accumulate statistics in fp32
    pattern = node.get("norm_pattern")
    if node["op"] in ("mean", "sum", "rsqrt", "sqrt") and not pattern:
        return None
    if pattern == "mean of squares":
        if node["low_precision"] or node.get("square_dtype") in LOW:
            # (c * c).mean() overflows in the square: the fix moves both to fp32
            square = graph.nodes[node["square_node"]]["op"]
            return {"pattern": pattern, "statistic_dtype": node.get("square_dtype") or node["compute_dtype"],
                    "fix_ops": list(dict.fromkeys([square, node["op"]]))}
        return None
    if not node["low_precision"]:
        return None
    if pattern == "rsqrt of a variance" and _variance_already_reported(graph, name):
        return None
    return {"pattern": pattern or node["op"]}


def _variance_already_reported(graph, name) -> bool:
    """The hand-written variance feeding this rsqrt/sqrt is itself flagged: report it once."""
    for p in producers(graph, name):
        candidates = [p, *producers(graph, p)] if graph.nodes[p]["op"] == "add" else [p]
        for c in candidates:
            node = graph.nodes[c]
            if node.get("norm_pattern") == "mean of squares" and (
                    node["low_precision"] or node.get("square_dtype") in LOW):
                return True
    return False


@check
def reduction_low_precision(graph, name, node, target):
    if node.get("norm_pattern"):
        return None  # reported as a hand-written norm (PA102)
    extent = node.get("reduced_extent")
    evidence = {"extent": extent}
    if extent is not None and extent < param("short_extent"):
        evidence["case"] = "short"
    return evidence


@check
def rnn_state(graph, name, node, target):
    return {"steps": node.get("rnn_steps")}


@check
def attention_logits(graph, name, node, target):
    if node.get("feeds_softmax") and node.get("scaled_after") and not node.get("scaled_before"):
        return {"softmax": node["feeds_softmax"]}
    return None


@check
def unrepresentable_constant(graph, name, node, target):
    bad = [c for c in node["constants"] if c["status"] in ("overflow", "underflow")]
    if not bad:
        return None
    worst = next((c for c in bad if c["status"] == "overflow"), bad[0])
    return {"value": worst["value"], "value_text": f"{worst['value']:g}", "stored": worst["stored"], "status": worst["status"],
            **({"case": "underflow"} if worst["status"] == "underflow" else {}),
            "becomes": "inf" if worst["status"] == "overflow" else "0"}


@check
def banned(graph, name, node, target):
    return {} if node["banned"] else None


@check
def integer_precision(graph, name, node, target):
    dtype = node["out_dtype"]
    bound = node.get("int_max")
    if dtype not in LOW or bound is None:
        return None
    limit = EXACT_INTEGER_LIMIT[dtype]
    if bound <= limit:
        return None
    for p in producers(graph, name):  # report where the loss starts, not every op after it
        before = graph.nodes[p]
        if before["out_dtype"] == dtype and (before.get("int_max") or 0) > limit:
            return None
    return {"max_value": bound, "exact_limit": limit}


@check
def low_precision_outputs(graph, target):
    hits = []
    for out in graph.graph.get("outputs", []):
        if out["dtype"] in LOW and out["node"] is not None:
            hits.append((out["node"], {"output_dtype": out["dtype"]}))
    return hits


@check
def ineffective_upcast(graph, name, node, target):
    if target.mode != "autocast" or node["out_dtype"] != "float32":
        return None
    undone = [c for c in consumers(graph, name)
              if graph.nodes[c]["autocast_cast"] and graph.nodes[c]["low_precision"]]
    if not undone:
        return None
    first = graph.nodes[undone[0]]
    return {"undone_by": undone[0], "undone_op": first["op"], "undone_line": first["line"]}
