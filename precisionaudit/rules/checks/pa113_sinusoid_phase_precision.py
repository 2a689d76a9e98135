"""PA113 sinusoid-phase-precision: the phase of a sin/cos (position x frequency, timestep x
1000) is stored in fp16/bf16 where its rounding is a large phase error.
"""
from __future__ import annotations

from ..registry import Fix, Hit, check, param


def _phase_threshold(node) -> float:
    """The phase error PA113 reports: an assumed unit-scale input needs the larger one."""
    assumed = node["phase_basis"] == "unit-scale inputs"
    return param("unknown_range_error" if assumed else "max_phase_error")


def _phase_hazard(node) -> bool:
    return node.get("phase_error") is not None and node["phase_error"] >= _phase_threshold(node)


@check
def sinusoid_phase_precision(graph, name, node, target):
    """A low-precision store on a sin/cos phase's chain whose rounding is a large phase error
    (analysis/phases.py), reported at the chain's first such store: where the loss starts."""
    if not _phase_hazard(node) or any(_phase_hazard(graph.nodes[b]) for b in node["phase_stores_before"]):
        return None
    sinusoid = graph.nodes[node["phase_sinusoid"]]
    assumed = node["phase_basis"] == "unit-scale inputs"
    return Hit(name, {"phase_error": node["phase_error"], "phase_max": node["phase_max"],
                      "error_text": f"{node['phase_error']:.3g}", "phase_text": f"{node['phase_max']:.4g}",
                      "basis": node["phase_basis"], "sinusoid": sinusoid["op"], "sinusoid_line": sinusoid["line"],
                      "assumed": " (model inputs taken as lying in [-1, 1])" if assumed else ""},
               fix=Fix(ops=tuple(node["phase_fix_ops"])))
