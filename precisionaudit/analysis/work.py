"""GEMM work: the multiply-adds of each GEMM, convolution and attention call, and the share
of the model's total that its site (every op of the same module class, op and shapes, as
the shape rules count a site) does.

A shape hint is worth acting on only in proportion to the work it could speed up: padding a
GEMM that does 0.3% of the model's GEMM work saves at most 0.3% of that time (Amdahl's
law). Writes a ``WorkFacts`` (analysis/facts.py) under ``work`` on each such node whose
work the shapes tell; nothing elsewhere.
"""
from __future__ import annotations

import math
from collections import defaultdict

from ..ir.graph import numel
from .facts import WorkFacts

#: GEMMs of two operands, by the index of their first operand (baddbmm/addmm: bias first)
FIRST_OPERAND = {"matmul": 0, "bmm": 0, "mm": 0, "baddbmm": 1, "addmm": 1}
CONVS = {"conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d"}


def _weight(node, rank, fits):
    """The weight's shape: the parameter of that rank named ``weight`` (capture lists the
    operands in no fixed order), else the one operand of that rank that ``fits``."""
    named = [s for p, s in node["params"] if p.endswith("weight") and s and len(s) == rank and numel(s)]
    if len(named) == 1:
        return named[0]
    fitting = [s for s in node["in_shapes"] if s and len(s) == rank and numel(s) and fits(s)]
    return fitting[0] if len(fitting) == 1 else None


def macs(node) -> int | None:
    """Multiply-adds of one call, from its shapes; None where they do not tell."""
    op, out, shapes = node["op"], numel(node["out_shape"]), node["in_shapes"]
    if out is None:
        return None
    if op == "linear":
        weight = _weight(node, 2, lambda w: w[0] == node["out_shape"][-1])
        return out * weight[1] if weight else None  # F.linear(x, weight (out, in))
    if op in CONVS:
        weight = _weight(node, len(node["out_shape"]), lambda w: True)
        if weight is None:
            return None
        if op.startswith("conv_transpose"):  # weight (in, out / groups, k...): per input element
            inputs = numel(shapes[0])
            return inputs * math.prod(weight[1:]) if inputs else None
        return out * math.prod(weight[1:])  # weight (out, in / groups, k...): per output element
    if op in FIRST_OPERAND:
        first = FIRST_OPERAND[op]
        pair = shapes[first:first + 2]
        if len(pair) == 2 and pair[0] and isinstance(pair[0][-1], int):
            return out * pair[0][-1]
    if op == "scaled_dot_product_attention" and len(shapes) >= 3:
        q, k, v = shapes[:3]
        if all(numel(s) for s in (q, k, v)):
            return numel(q) // q[-1] * k[-2] * (q[-1] + v[-1])  # q @ k^T, then probs @ v
    return None


def site_key(node) -> tuple:
    """What makes two ops one site of a shape rule: module class, op and shapes."""
    return (node["module_type"], node["op"], tuple(map(tuple, (s or () for s in node["in_shapes"]))),
            tuple(tuple(s) for _, s in node["params"] if s))


def annotate(graph):
    work = {name: macs(node) for name, node in graph.nodes(data=True)}
    work = {name: m for name, m in work.items() if m}
    total = sum(work.values())
    if not total:
        return
    per_site = defaultdict(int)
    for name, m in work.items():
        per_site[site_key(graph.nodes[name])] += m
    for name, m in work.items():
        node = graph.nodes[name]
        node["work"] = WorkFacts(macs=m, site_share=per_site[site_key(node)] / total)
