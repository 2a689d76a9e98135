"""PA113 sinusoid-phase-precision: the phase of a sin/cos (position x frequency, timestep x
1000) is stored in fp16/bf16 where its rounding is a large phase error.
"""
from __future__ import annotations

from ..registry import Fix, Hit, check, param


def _phase_threshold(phase) -> float:
    """The phase error PA113 reports: an assumed unit-scale input needs the larger one."""
    assumed = phase.basis == "unit-scale inputs"
    return param("unknown_range_error" if assumed else "max_phase_error")


def _phase_hazard(node) -> bool:
    phase = node.get("phase")
    return phase is not None and phase.error >= _phase_threshold(phase)


@check
def sinusoid_phase_precision(graph, name, node, target):
    """A low-precision store on a sin/cos phase's chain whose rounding is a large phase error
    (analysis/phases.py), reported at the chain's first such store: where the loss starts."""
    if not _phase_hazard(node) or any(_phase_hazard(graph.nodes[b]) for b in node["phase"].stores_before):
        return None
    phase = node["phase"]
    sinusoid = graph.nodes[phase.sinusoid]
    return Hit(name, {"phase_error": phase.error, "phase_max": phase.largest,
                      "error_text": f"{phase.error:.3g}", "phase_text": f"{phase.largest:.4g}",
                      "basis": phase.basis, "sinusoid": sinusoid["op"], "sinusoid_line": sinusoid["line"],
                      "assumed_buffers": list(phase.assumed_buffers), "assumed": _assumptions(phase)},
               fix=Fix(ops=tuple(phase.fix_ops)))


def _assumptions(phase) -> str:
    """What the bound on |phase| assumes, in words: the message must say it is not measured."""
    said = []
    if phase.assumed_buffers:
        names = ", ".join(phase.assumed_buffers)
        said.append(f"the persistent buffer{'s' if len(phase.assumed_buffers) > 1 else ''} {names} "
                    "taken at the values the model was built with")
    if phase.basis == "unit-scale inputs":
        said.append("model inputs taken as lying in [-1, 1]")
    return f" ({'; '.join(said)})" if said else ""
