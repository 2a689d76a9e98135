"""Findings on an ONNX model → the nodes its float16 conversion keeps in float32.

The PyTorch planner names modules and lets dtype promotion carry an fp32 result
onward; an ONNX conversion casts every kept node's output straight back to the low
dtype. A node kept in fp32 because its result leaves fp16's range (an ``Exp``, a -1e9
mask in a ``Where``, attention logits) therefore drags along the nodes its result flows
through, up to the first node that brings it back into range (a ``Softmax``, a norm, a
``Div`` by a reduction of the same tensor, or a ``Mul`` by its ``Reciprocal``) — otherwise the kept node's inf just appears
one cast later. Everything else stays in the low dtype.

Entries group nodes by the rules that put them there; an op type whose every node is
kept becomes one ``op_types`` entry. Same findings, same file, byte for byte.
"""
from __future__ import annotations

import os

from dataclasses import dataclass, field

from ..core.findings import PLAN_MIN_SEVERITY, PLANNED_ACTIONS, SEVERITY_RANK
from ..runtime.onnx.graph import TRANSPARENT, attribute, consumers, name_nodes, producers
from .file import UNBLOCKABLE_OP_TYPES, Override, OverridePlan, not_covered

#: op types whose result can leave the low dtype's range although their inputs fit it.
GROWING = {"Exp", "Pow", "Reciprocal", "ReduceSum", "ReduceSumSquare", "ReduceProd", "CumSum",
           "MatMul", "Gemm", "Einsum", "Mul"}
#: op types whose result is back in range whatever the size of their (fp32) input.
BOUNDING = {"Softmax", "LogSoftmax", "Sigmoid", "Tanh", "Log", "Sqrt", "Reciprocal", "Erf", "Sin",
            "Cos", "Sign", "Atan", "Softsign", "HardSigmoid", "LayerNormalization",
            "GroupNormalization", "InstanceNormalization", "RMSNormalization",
            "SimplifiedLayerNormalization", "SkipLayerNormalization", "LpNormalization",
            # results that are not floating point: exact whatever the input's size
            "Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual", "IsInf", "IsNaN",
            "ArgMax", "ArgMin", "Shape", "Size"}
FLOAT_CASTS = {1, 10, 11, 16}  # Cast targets that stay floating point
SAME_SOURCE_DEPTH = 8  # how far back a Div's divisor is traced to its numerator


@dataclass
class Unit:
    """One hazard a plan fixes: the flagged node, the rules that flag it (rule → message)
    and, if its result can leave the low dtype's range, the nodes that result flows through."""

    seed: str
    rules: dict[str, str]
    chain: list[str] = field(default_factory=list)

    @property
    def nodes(self) -> list[str]:
        return [self.seed, *self.chain]


def make_onnx_plan(findings, model, target, min_severity: str = PLAN_MIN_SEVERITY):
    """(OverridePlan, notes) for ``model`` (a ModelProto) from the scan's findings on it."""
    units, notes = hazard_units(findings, model, min_severity)
    return assemble(units, model.graph, target), notes


def hazard_units(findings, model, min_severity: str = PLAN_MIN_SEVERITY):
    """([Unit] in graph order, notes on the findings a plan cannot cover)."""
    graph = model.graph
    order = {name: i for i, name in enumerate(name_nodes(graph))}
    by_name = {node.name: node for node in graph.node}
    threshold = SEVERITY_RANK[min_severity]
    units: dict[str, Unit] = {}
    grows: set[str] = set()
    notes = []
    for f in sorted(findings, key=lambda f: (order.get(f.node, len(order)), f.rule)):
        if SEVERITY_RANK[f.severity] > threshold:
            continue
        action = (f.fix or {}).get("action")
        if action not in PLANNED_ACTIONS or f.node not in by_name:
            if action:  # a change to the model (replace, cast the output, pad a shape)
                notes.append(not_covered(f))
            continue
        units.setdefault(f.node, Unit(f.node, {})).rules.setdefault(f.rule, f.message)
        overflow = f.rule == "PA107" and (f.evidence or {}).get("status") == "overflow"
        if overflow or by_name[f.node].op_type in GROWING:
            grows.add(f.node)
    for name in grows:
        units[name].chain = [n.name for n in out_of_range_chain(by_name[name], graph)]
    for f in findings:  # measured on calibration data (--data): the values say where it ends
        evidence = f.evidence or {}
        if f.node in units and "back_in_range" in evidence:
            units[f.node].chain = [n.name for n in measured_chain(
                by_name[f.node], graph, set(evidence["chain"]), set(evidence["back_in_range"]))]
    return sorted(units.values(), key=lambda u: order[u.seed]), notes


def assemble(units, graph, target) -> OverridePlan:
    """The plan keeping ``units`` in fp32: one entry per set of rules, a node in the entry of
    the unit it was flagged by (else of the first unit whose chain reaches it)."""
    order = {node.name: i for i, node in enumerate(graph.node)}
    owner = {u.seed: frozenset(u.rules) for u in units}
    chained: dict[frozenset, int] = {}
    messages: dict[str, str] = {}
    for unit in units:
        messages.update({r: m for r, m in unit.rules.items() if r not in messages})
        for name in unit.chain:
            if name not in owner:
                owner[name] = frozenset(unit.rules)
                chained[owner[name]] = chained.get(owner[name], 0) + 1
    groups: dict[frozenset, list[str]] = {}
    for name in sorted(owner, key=order.get):
        groups.setdefault(owner[name], []).append(name)
    entries = [_entry(rules, names, graph, messages, chained.get(rules, 0))
               for rules, names in groups.items()]
    return OverridePlan(target={**target.as_dict(), "mode": "pure"}, overrides=entries)


def out_of_range_chain(start, graph) -> list:
    """Nodes downstream of ``start`` that an out-of-range result reaches before a node
    brings it back in range (that node included), in graph order."""
    writers = producers(graph)
    # a Cast to an integer type is exact: nothing left to protect there
    return _downstream(start, graph,
                       lambda node: node.op_type != "Cast" or attribute(node, "to") in FLOAT_CASTS,
                       lambda node: not _brings_back(node, writers))


def measured_chain(start, graph, hot_path: set, ends: set) -> list:
    """The nodes a measured out-of-range result of ``start`` flows through: the IR's chain
    (``hot_path``, up to the nodes where the values are back in range, ``ends``) with the
    reshapes and transposes between them, which the IR does not list but a conversion
    would otherwise run in float16."""
    return _downstream(start, graph, lambda node: node.name in hot_path or node.op_type in TRANSPARENT,
                       lambda node: node.name not in ends)


def _downstream(start, graph, enters, goes_on) -> list:
    """The nodes a value of ``start`` reaches, in graph order: through readers that
    ``enters`` admits, onward from those where it ``goes_on``."""
    readers = consumers(graph)
    reached, frontier = {}, list(start.output)
    while frontier:
        tensor = frontier.pop()
        for node in readers.get(tensor, ()):
            if node.name in reached or node.name == start.name or not enters(node):
                continue
            reached[node.name] = node
            if goes_on(node):
                frontier.extend(o for o in node.output if o)
    position = {n.name: i for i, n in enumerate(graph.node)}
    return sorted(reached.values(), key=lambda n: position[n.name])


def _brings_back(node, writers) -> bool:
    if node.op_type in BOUNDING:
        return True
    if len(node.input) != 2:
        return False
    # x / f(x), f a reduction of x (a hand-written softmax or norm): back in [-1, 1]-ish
    if node.op_type == "Div":
        return _derives_from(node.input[1], node.input[0], writers, SAME_SOURCE_DEPTH)
    # x * (1 / f(x)): the same division written with a Reciprocal (an RMSNorm's x * rsqrt(mean(x^2)),
    # which the dynamo exporter writes as Mul(x, Reciprocal(Sqrt(...))))
    return node.op_type == "Mul" and any(
        _is_reciprocal_of(factor, other, writers) for factor, other in (node.input, node.input[::-1]))


def _is_reciprocal_of(tensor, source, writers) -> bool:
    node = writers.get(tensor)
    return (node is not None and node.op_type == "Reciprocal"
            and _derives_from(node.input[0], source, writers, SAME_SOURCE_DEPTH))


def _derives_from(tensor, source, writers, depth) -> bool:
    if tensor == source:
        return True
    node = writers.get(tensor)
    if node is None or depth == 0:
        return False
    return any(_derives_from(i, source, writers, depth - 1) for i in node.input if i)


def _entry(rules: frozenset, names: list[str], graph, messages, chained: int) -> Override:
    """One override for ``names``; op types whose every node is listed become ``op_types``."""
    listed = set(names)
    by_type: dict[str, list[str]] = {}
    for node in graph.node:
        by_type.setdefault(node.op_type, []).append(node.name)
    whole = sorted(t for t, members in by_type.items()
                   if len(members) > 1 and t not in UNBLOCKABLE_OP_TYPES and listed >= set(members))
    covered = {n for t in whole for n in by_type[t]}
    nodes = [n for n in names if n not in covered]
    reason = "; ".join(messages[r] for r in sorted(rules))
    if chained:
        reason += (f" (with the {chained} node{'s' * (chained != 1)} its out-of-range result "
                   "flows through until it is back in range)")
    return Override(module=None, nodes=nodes or None, op_types=whole or None,
                    rules=sorted(rules), reason=reason)


def header(path: str, plan: OverridePlan, notes=(), plan_path: str = "plan.yaml") -> list[str]:
    """The comment lines at the top of an ONNX plan file: what it is and how to use it."""
    dtype = plan.target.get("dtype", "float16")
    flags = "" if dtype == "float16" else f" --dtype {dtype}"
    out = os.path.splitext(path)[0] + "_fp16.onnx"
    lines = [f"precisionaudit override plan for {path} ({dtype}, the whole graph converted)",
             "the listed nodes (by name, or every node of an op type) stay in float32:",
             f"    precisionaudit convert {path}{flags} --plan {plan_path} -o {out}",
             f"check it: precisionaudit check {path}{flags} --plan {plan_path}"]
    if notes:
        lines.append("not covered by this plan (needs a change to the model):")
        lines.extend(f"    {n}" for n in notes)
    return lines
