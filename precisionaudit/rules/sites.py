"""Findings as a reader wants them: one per distinct site, and not a flood of one rule.

A shape hint (PA2xx) repeated over the 24 identical layers of a model, or a loop that runs
one matmul 1,024 times, is one site: it is reported once, with the count of occurrences.
Precision findings stay one per op: a plan needs every module it must keep in fp32.
"""
from __future__ import annotations

from collections import defaultdict

from ..core.findings import SEVERITY_RANK

#: rules whose findings describe a shape, the same wherever it recurs
SITE_RULES = ("PA2",)
#: a GEMM too small for Tensor Cores (PA204) is not also told to pad (PA201)
SUPERSEDES = {"PA204": "PA201"}
#: at most this many findings of one rule per model are reported; the rest are counted
MAX_PER_RULE = 10


def _module_type(graph, finding) -> str:
    if finding.node and graph.has_node(finding.node):
        return graph.nodes[finding.node]["module_type"]
    return graph.graph.get("modules", {}).get(finding.module, {}).get("type", "")


def collapse_sites(findings, graph):
    """One finding per (rule, module class, message) for the shape rules; ``occurrences``
    and the message say how many ops or modules it stands for. One GEMM gets one shape
    rule (SUPERSEDES)."""
    groups = defaultdict(list)
    kept = []
    superseded = {(SUPERSEDES[f.rule], f.model, f.node) for f in findings if f.rule in SUPERSEDES}
    for f in findings:
        if (f.rule, f.model, f.node) in superseded:
            continue
        if f.rule.startswith(SITE_RULES):
            key = (f.rule, _module_type(graph, f), f.message)
            if not groups[key]:
                kept.append(f)
            groups[key].append(f)
        else:
            kept.append(f)
    for key, same in groups.items():
        if len(same) > 1:
            first = same[0]
            first.evidence["occurrences"] = len(same)
            first.evidence["modules"] = sorted({f.module for f in same})
            first.message += f" ({len(same)} occurrences)"
    return kept


def cap_per_rule(findings, limit=MAX_PER_RULE):
    """The ``limit`` most severe findings of each rule and model; the last one kept says how
    many more there are (``evidence["more"]``)."""
    by_rule = defaultdict(list)
    for f in findings:
        by_rule[(f.model, f.rule)].append(f)
    dropped = set()
    for same in by_rule.values():
        if len(same) <= limit:
            continue
        ranked = sorted(same, key=lambda f: SEVERITY_RANK[f.severity])
        last, rest = ranked[limit - 1], ranked[limit:]
        last.evidence["more"] = len(rest)
        last.message += f" (+{len(rest)} more {last.rule} findings in this model)"
        dropped.update(id(f) for f in rest)
    return [f for f in findings if id(f) not in dropped]
