"""PA301 activation-overflow: an op's measured result (--data) does not fit its low dtype.
Without --data nodes carry no measurement and it finds nothing.

It reads both runs of the range pass (analysis/facts.py, ``CalibrationFacts``): the fp32
reference for how far past the dtype's max a value goes (the run under the target only
knows inf there), the run under the target for whether the program that runs computes that
value at all (code that branches on the dtype writes -1e30 in fp32 and -1e4 in fp16), and
for a value that overflows only in that program (a finfo(fp16).min mask plus a score rounds
to -inf, and a softmax turns the row into NaN). The message names the run it measured.
"""
from __future__ import annotations

import math

from ...analysis.facts import fact
from ...analysis.ranges import PAIRWISE, value_range
from ...core.numerics import LARGEST_FINITE
from ...ir.graph import consumers, producers
from ..registry import Fix, Hit, check
from .low_dtype import low_dtype
from .plan_region import common_module, number

REFERENCE = "float32"
#: ops that bound a value by constants, inf included (elementwise max/min: ranges.PAIRWISE)
CLAMPS = {"clamp", "clamp_min", "clamp_max", "hardtanh"}
BECOMES_INF = "it becomes inf there"


def _headroom(graph) -> float:
    return graph.graph.get("headroom", 2.0)


def _hot_stats(stats, headroom, limit) -> bool:
    return bool(stats) and math.isfinite(stats["max_abs"]) and stats["max_abs"] * headroom >= limit


def reached(graph, node, dtype):
    """(max |x|, batch, run) of an op whose measured result comes within the headroom of
    ``dtype``'s max in the program that runs, or None. ``run``: "float32" where the fp32
    reference holds the value (the target run's is inf, or as large), ``dtype`` where only
    the run under the target reaches it. A reference value the target run does not come near
    (all finite, within the headroom) is a value only the fp32 program computes: None. A
    value that is inf/NaN in the fp32 reference itself is the model's own problem, not the
    low dtype's: not judged."""
    measured = node.get("calibration")
    if measured is None:
        return None
    headroom, limit = _headroom(graph), LARGEST_FINITE[dtype]
    reference, target = measured.stats, measured.target
    if _hot_stats(reference, headroom, limit):
        if target is not None and not target.get("nonfinite") and target["max_abs"] * headroom < limit:
            return None  # the program that runs never computes it (a branch on the dtype)
        return reference["max_abs"], reference["batch"], REFERENCE
    if _hot_stats(target, headroom, limit):
        return target["max_abs"], target["batch"], dtype
    return None


def _hot(graph, node, dtype) -> bool:
    return reached(graph, node, dtype) is not None


@check
def activation_overflow(graph, name, node, target):
    """An op whose measured result does not fit (or barely fits) the low dtype it is stored
    in, reported where it starts: not at ops that inherit it from a low-precision producer.
    Or an op whose result only the run under the target makes inf, where that inf turns
    into NaN downstream (the fp32 reference is finite and NaN-free there)."""
    dtype = low_dtype(node)
    if node.get("calibration") is None or dtype is None:
        return None
    limit = LARGEST_FINITE[dtype]
    big_inputs = [p for p in producers(graph, name) if _hot(graph, graph.nodes[p], dtype)]
    consequence, nan_at = BECOMES_INF, None
    measured = reached(graph, node, dtype)
    if measured is not None:
        if any(low_dtype(graph.nodes[p]) == dtype for p in big_inputs):
            return None  # inherited: the producer's finding and plan chain cover this op
        value, batch, run = measured
        where, text = "result", f"{value:.4g}"
    elif node.get("compute_dtype") == dtype and any(low_dtype(graph.nodes[p]) != dtype
                                                     for p in big_inputs):
        # an fp32 value (kept fp32 by hand, like T5's wo) cast down to fp16 here
        big_inputs = [p for p in big_inputs if low_dtype(graph.nodes[p]) != dtype]
        value, batch, run = reached(graph, graph.nodes[big_inputs[0]], dtype)
        where, text = f"input (from {big_inputs[0]})", f"{value:.4g}"
    else:
        rounded = rounds_to_nan(graph, name, node)
        if rounded is None:
            return None
        text, batch, nan_at = rounded
        value, where, run = None, "result", dtype
        consequence = f"{graph.nodes[nan_at]['op']} (line {graph.nodes[nan_at].get('line')}) turns it into NaN"
    if value is not None and value <= limit:  # the "near" case: it still fits
        subject = name if where == "result" else big_inputs[0]
        if held_in_range(graph, subject, run, limit, clamps=where == "result"):
            return None
        consequence = f"within the {_headroom(graph):g}x headroom of overflowing there"
    chain = overflow_chain(graph, name, dtype) if nan_at is None else _path(graph, name, nan_at)
    nodes = [name, *chain]
    fix_module = common_module(graph, nodes)
    own = node.get("module", "")
    # a module that is nothing but this op (T5's ``wo``): the plan names it whole, as
    # ``_keep_in_fp32_modules`` does, and the chain's ops around it by op
    whole = (own,) if own != fix_module and _only_op_of(graph, name, own) else ()
    return Hit(name, {"measured": number(value), "measured_text": text, "batch": batch,
                      "run": run, "run_text": _run_text(run), "consequence": consequence,
                      "nan_at": nan_at,
                      "where": where, "limit": number(limit), "stored": dtype,
                      "first_nonfinite": node["calibration"].nonfinite_first,
                      "chain": chain, "back_in_range": [c for c in chain if not _hot(graph, graph.nodes[c], dtype)],
                      "fix_module": fix_module},
               case=None if value is None or value > limit else "near",
               fix=Fix(ops=tuple(dict.fromkeys(graph.nodes[n]["op"] for n in (chain if whole else nodes))),
                       whole_modules=whole))


def held_in_range(graph, name, run, limit, clamps=True) -> bool:
    """A value near the dtype's max that cannot grow past it, so no headroom is at stake: the
    model's own code bounds it within the range (a static interval: a finfo.min mask built
    from constants), it is a constant the op writes (masked_fill's finfo.min), or (``clamps``)
    every next op brings it back into the range on the side it is near (OPT's
    ``torch.max(attn_weights, finfo.min)`` after adding the mask)."""
    node = graph.nodes[name]
    static = fact(node, "range.value_range")
    if static is not None and fact(node, "range.source") == "static" and max(map(abs, static)) <= limit:
        return True
    stats = node["calibration"].stats if run == REFERENCE else node["calibration"].target
    value = stats["max_abs"]
    if any(abs(abs(c) - value) <= value * 2.0 ** -10 for _, c in node["scalars"]
           if isinstance(c, (int, float)) and not isinstance(c, bool)):
        return True
    low, high = -stats["lo"] * _headroom(graph) >= limit, stats["hi"] * _headroom(graph) >= limit
    uses = consumers(graph, name)
    return clamps and bool(uses) and all(_bounds_back(graph, use, name, limit, low, high) for use in uses)


def _bounds_back(graph, use, name, limit, low, high) -> bool:
    """``use`` is a clamp (or an elementwise max/min with a bound) whose output stays in
    [-limit, limit] on the sides asked, whatever ``name`` holds, inf included (a softmax's
    output is in [0, 1] too, but a row of -inf makes it NaN)."""
    node = graph.nodes[use]
    if node["op"] not in CLAMPS and node["target"] not in PAIRWISE:
        return False
    ranges = {p: fact(graph.nodes[p], "range.value_range") for p in producers(graph, use)}
    bound = value_range(graph, use, graph.nodes[use], {**ranges, name: (-math.inf, math.inf)})
    return bound is not None and (not low or bound[0] >= -limit) and (not high or bound[1] <= limit)


def _run_text(run: str) -> str:
    return "in the fp32 reference" if run == REFERENCE else f"in the {run} run"


def _infinite_only_in_target(node) -> bool:
    """The run under the target has inf here, the fp32 reference none (or no such call)."""
    measured = node.get("calibration")
    target = measured.target if measured else None
    if not target or target.get("nonfinite", 0) <= target.get("nan", 0):
        return False
    return measured.stats is None or not measured.stats.get("nonfinite")


def _nan_only_in_target(node) -> bool:
    measured = node.get("calibration")
    target = measured.target if measured else None
    return bool(target and target.get("nan")) and (measured.stats is None or not measured.stats.get("nan"))


def _finite_in_target(node) -> bool:
    measured = node.get("calibration")
    return not (measured and measured.target and measured.target.get("nonfinite"))


def rounds_to_nan(graph, name, node):
    """(text, batch, NaN node) for an op whose result is inf only in the run under the target
    (the fp32 reference is finite there), from finite operands, and whose inf a later op
    turns into NaN only in that run: the -inf of a fully masked row before its softmax. An
    inf that the program brings back (a torch.max with finfo.min, a partly masked softmax)
    is no hazard: None."""
    if not _infinite_only_in_target(node) or not all(_finite_in_target(graph.nodes[p]) for p in producers(graph, name)):
        return None
    target = node["calibration"].target
    order = {n: i for i, n in enumerate(graph.nodes)}
    seen, frontier = {name}, [name]
    while frontier:
        for c in sorted(consumers(graph, frontier.pop(0)), key=order.get):
            if c in seen:
                continue
            seen.add(c)
            attrs = graph.nodes[c]
            if _nan_only_in_target(attrs):
                text = "-inf" if target.get("lo") == -math.inf else "inf"
                batch = target.get("nonfinite_batch")
                return text, target["batch"] if batch is None else batch, c
            if not _finite_in_target(attrs):
                frontier.append(c)
    return None


def _path(graph, start: str, end: str) -> list[str]:
    """The nodes after ``start`` up to ``end`` on the data flow between them (in graph order)."""
    import networkx as nx

    between = nx.descendants(graph, start) & (nx.ancestors(graph, end) | {end})
    order = {n: i for i, n in enumerate(graph.nodes)}
    return sorted(between, key=order.get)


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
