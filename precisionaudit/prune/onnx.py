"""``plan --prune``: keep only the hazards the float16 run shows are needed.

The static plan keeps every flagged node in fp32 — right when nothing is known about the
data, conservative when something is. With generated inputs (as ``check`` makes them)
a few onnxruntime runs settle it: the fp32 reference, the model converted as a whole
(``baseline``) and then converted with a plan. If the baseline is within tolerance, no
node needs fp32. Otherwise the hazards kept are those containing a node where the
baseline's error starts — a node whose result diverges although none of its inputs does
(downstream nodes only inherit the error) — and the plan made of them is run; if it
still fails, the hazards where its own error starts are added once, and then the whole
static plan is the answer. Every plan written this way has passed a run, or says that
it has not.

What it cannot see: data unlike the generated inputs. A hazard dropped here is one the
generated inputs do not trigger (a -1e9 mask clipped to -65504 in front of a softmax,
a softmax whose runtime accumulates in fp32), which is the point — and the risk.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..check.onnx.runner import Reference, run_variant
from ..plan.onnx import assemble

ROUNDS = 2  # error-guided plans tried before the whole static plan


@dataclass
class Pruned:
    units: list  # the hazards kept
    dropped: list  # the hazards the runs show are not needed
    passed: bool  # whether the last plan run was within tolerance
    attempts: list = field(default_factory=list)  # (hazards kept, status) per planned run
    unplanned: list = field(default_factory=list)  # nodes where error starts that no hazard covers


def prune(units, ref: Reference, target, tol) -> Pruned:
    """The hazards of ``units`` that the converted model needs on ``ref``'s inputs."""
    baseline, _, kinds = run_variant(ref, "baseline", None, tol)
    if baseline["status"] == "ok":
        return Pruned([], list(units), True)
    chosen: list = []
    attempts = []
    unplanned: set[str] = set()
    for round_ in range(ROUNDS + 1):
        starts = error_starts(ref.model, ref.watched, kinds)
        covered = {n for u in units for n in u.nodes}
        unplanned |= starts - covered
        new = [u for u in units if u not in chosen and set(u.nodes) & starts]
        if not new or round_ == ROUNDS:
            new = [u for u in units if u not in chosen]  # fall back: the whole static plan
        if not new:
            break
        chosen = [u for u in units if u in chosen or u in new]
        entry, _, kinds = run_variant(ref, "planned", assemble(chosen, ref.model.graph, target), tol)
        attempts.append((len(chosen), entry["status"]))
        if entry["status"] == "ok":
            return Pruned(chosen, [u for u in units if u not in chosen], True, attempts, sorted(unplanned))
    return Pruned(chosen, [u for u in units if u not in chosen], False, attempts, sorted(unplanned))


def error_starts(model, watched, kinds) -> set[str]:
    """Nodes whose result diverges from the reference although none of their inputs does."""
    diverged = {tensor for node, i, tensor in watched if kinds.get((node, i))}
    return {node.name for node in model.graph.node
            if any(o in diverged for o in node.output) and not any(i in diverged for i in node.input)}


def header_lines(pruned: Pruned, ref: Reference, seed: int) -> list[str]:
    """What the pruning did, for the plan file's header."""
    runs = ref.counts["forward"]
    verdict = "passed" if pruned.passed else "did NOT pass"
    lines = [f"pruned on generated inputs (seed {seed}, {runs} onnxruntime runs): keeps "
             f"{len(pruned.units)} of {len(pruned.units) + len(pruned.dropped)} flagged hazards; "
             f"the plan's float16 run {verdict} the check's tolerance"]
    lines += _dropped(pruned, "on these inputs")
    if pruned.unplanned:
        lines.append("error starts at nodes no finding covers: " + ", ".join(pruned.unplanned))
    return lines


def pruned_plan(findings, model, path: str, target, min_severity: str, input_shapes: dict, seed: int,
                values=None):
    """(OverridePlan, notes, header lines, Pruned) for ``plan --prune``; with ``values.data``
    (.npz calibration batches) pruned on those batches instead of generated inputs."""
    from ..apply.onnx import BF16_UNSUPPORTED
    from ..check.onnx.runner import run_reference
    from ..check.tolerance import tolerance_for
    from ..core.errors import UsageError
    from ..plan.onnx import hazard_units

    if target.dtype != "float16":
        raise UsageError(BF16_UNSUPPORTED)
    units, notes = hazard_units(findings, model, min_severity)
    if values is not None and values.data is not None:
        pruned, lines = _pruned_on_data(units, model, path, target, values)
        return assemble(pruned.units, model.graph, target), notes, lines, pruned
    ref = run_reference(path, input_shapes, seed, model)
    pruned = prune(units, ref, target, tolerance_for(target.dtype))
    return assemble(pruned.units, model.graph, target), notes, header_lines(pruned, ref, seed), pruned


def _pruned_on_data(units, model, path, target, values):
    """Pruned on each calibration batch; the plan keeps every hazard some batch needs."""
    from ..runtime.data import onnx_batches
    from ..check.onnx.runner import run_reference
    from ..check.tolerance import tolerance_for
    from ..runtime.onnx.inputs import graph_inputs

    kept, passed, runs, batches = set(), True, 0, 0
    names = [i.name for i in graph_inputs(model)]
    for feeds in onnx_batches(values.data, names, values.batches):
        ref = run_reference(path, None, 0, model, feeds)
        one = prune(units, ref, target, tolerance_for(target.dtype))
        kept |= {u.seed for u in one.units}
        passed &= one.passed
        runs += ref.counts["forward"]
        batches += 1
    pruned = Pruned([u for u in units if u.seed in kept], [u for u in units if u.seed not in kept], passed)
    verdict = "passed" if passed else "did NOT pass"
    lines = [f"pruned on --data {values.data} ({batches} batch{'es' * (batches != 1)}, {runs} onnxruntime "
             f"runs): keeps {len(pruned.units)} of {len(units)} flagged hazards, those some batch "
             f"needs; each batch's float16 run with them {verdict} the check's tolerance"]
    return pruned, lines + _dropped(pruned, "on every batch")


def _dropped(pruned: Pruned, where: str) -> list[str]:
    """The header line naming the hazards the pruning dropped, if any."""
    if not pruned.dropped:
        return []
    return [f"dropped (within tolerance without them {where}): "
            + ", ".join(f"{u.seed} ({'/'.join(sorted(u.rules))})" for u in pruned.dropped)]
