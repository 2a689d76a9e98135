"""``plan --prune``: keep only the hazards the float16 run shows are needed.

The static plan keeps every flagged node in fp32 — right when nothing is known about the
data, conservative when something is. With generated inputs (as ``check`` makes them)
a few onnxruntime runs settle it: the fp32 reference, the model converted as a whole
(``baseline``) and then converted with a plan. If the baseline is within tolerance, no
node needs fp32. Otherwise the hazards kept are those containing a node where the
baseline's error starts — a node whose result diverges although none of its inputs does
(downstream nodes only inherit the error) — and the plan made of them is run; if it
still fails, the hazards where its own error starts are added once, and then the whole
static plan is the answer.

When that still fails (or nothing is flagged at all), the runs grow the plan from their
own evidence, as the PyTorch search does (prune/pytorch.py): the node where the failing
run first leaves the tolerance is kept in float32 (with the nodes an overflowing result
flows through, when it went non-finite) and the model runs again, up to ``MAX_GROWTH``
regions. A divergence at a node already in float32 has its cause upstream: its inputs
arrive with the error of the float16 nodes before it (an error that grows layer by layer,
as in a ResNet-50 whose BatchNorm statistics amplify it, crosses the tolerance far from
where it starts). The region is then every node it depends on, narrowed from both ends by
bisection to the smallest window of them that still passes: near the divergence for a
local cause, the network's first layers for an error that grows from there. Every plan
written this way has passed a run, or says that it has not.

What it cannot see: data unlike the generated inputs. A hazard dropped here is one the
generated inputs do not trigger (a -1e9 mask clipped to -65504 in front of a softmax,
a softmax whose runtime accumulates in fp32), which is the point — and the risk.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..check.onnx.runner import Reference, run_variant
from ..plan.file import Override
from ..plan.onnx import assemble, out_of_range_chain
from ..runtime.onnx.graph import producers

ROUNDS = 2  # error-guided plans tried before the whole static plan
#: at most this many float32 regions are added by following the check's first divergence
MAX_GROWTH = 8
GROWN_REASON = "plan --prune: where the float16 run first left the check's tolerance (no finding flags it)"


@dataclass
class Pruned:
    units: list  # the hazards kept
    dropped: list  # the hazards the runs show are not needed
    passed: bool  # whether the last plan run was within tolerance
    attempts: list = field(default_factory=list)  # (hazards kept, status) per planned run
    unplanned: list = field(default_factory=list)  # nodes where error starts that no hazard covers
    grown: list = field(default_factory=list)  # nodes kept in float32 by following first divergences
    added: list = field(default_factory=list)  # each region grown, in words
    stuck: str | None = None  # why growing stopped short of a pass
    runs: int = 0  # onnxruntime runs, the reference included


def prune(units, ref: Reference, target, tol) -> Pruned:
    """The hazards of ``units`` that the converted model needs on ``ref``'s inputs, and the
    nodes grown from the runs' first divergences when those are not enough."""
    entry, conversion, kinds = run_variant(ref, "baseline", None, tol)
    if entry["status"] == "ok":
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
        entry, conversion, kinds = run_variant(ref, "planned", assemble(chosen, ref.model.graph, target), tol)
        attempts.append((len(chosen), entry["status"]))
        if entry["status"] == "ok":
            return Pruned(chosen, [u for u in units if u not in chosen], True, attempts, sorted(unplanned))
    search = Growth(ref, target, tol, chosen)
    passed = search.grow(entry, _kept(conversion))
    return Pruned(chosen, [u for u in units if u not in chosen], passed, attempts, sorted(unplanned),
                  search.grown, search.added, search.stuck)


def with_grown(plan, grown: list, graph):
    """``plan`` with the ``grown`` nodes (in graph order) as one more float32 entry."""
    if not grown:
        return plan
    order = {node.name: i for i, node in enumerate(graph.node)}
    plan.overrides.append(Override(module=None, nodes=sorted(set(grown), key=order.get), reason=GROWN_REASON))
    return plan


def _kept(conversion) -> set:
    return set(conversion.kept) if conversion is not None else set()


class Growth:
    """The plan of ``units`` grown from the first divergences of its runs (the module's
    docstring): ``grown`` (the nodes added), ``added`` (each region, in words), ``stuck``."""

    def __init__(self, ref: Reference, target, tol, units):
        self.ref, self.target, self.tol, self.units = ref, target, tol, units
        self.graph = ref.model.graph
        self.grown: list[str] = []
        self.added: list[str] = []
        self.stuck: str | None = None
        self._runs: dict = {}  # the grown node set → its run: a window the narrowing passed is not rerun

    def run(self, nodes: list, name: str):
        """(entry, nodes kept in float32) of the plan with ``nodes`` grown."""
        key = frozenset(nodes)
        if key not in self._runs:
            plan = with_grown(assemble(self.units, self.graph, self.target), nodes, self.graph)
            entry, conversion, _ = run_variant(self.ref, name, plan, self.tol)
            self._runs[key] = entry, _kept(conversion)
        return self._runs[key]

    def grow(self, entry: dict, kept: set) -> bool:
        """Whether a grown plan passed, starting from ``entry`` (the failing run of the
        units alone) and ``kept`` (the nodes it ran in float32)."""
        by_name = {node.name: node for node in self.graph.node}
        while entry["status"] != "ok":
            where = entry.get("first_divergence")
            if where is None:
                self.stuck = (f"the converted model failed ({entry['error']})" if entry.get("error") else
                              "the outputs leave the tolerance but no node does first")
                return False
            if len(self.added) == MAX_GROWTH:
                self.stuck = f"still failing after {MAX_GROWTH} added regions (next: {where['node']})"
                return False
            node = by_name[where["node"]]
            if node.name not in kept:
                region = [node.name]
                if where["kind"] == "nonfinite":  # an overflow: on to where its result is back in range
                    region += [n.name for n in out_of_range_chain(node, self.graph) if n.name not in kept]
                words = f"{node.name} ({where['kind'].replace('_', ' ')})"
            else:
                region = self._upstream_window([n for n in self._upstream(node) if n not in kept])
                if not region:
                    self.stuck = f"{node.name} still diverges with everything before it in float32"
                    return False
                words = (f"{len(region)} node{'s' * (len(region) != 1)} upstream of {node.name}, "
                         f"{region[0]} .. {region[-1]}")
            self.grown += region
            self.added.append(words)
            entry, kept = self.run(self.grown, f"plus {words}")
        return True

    def _upstream(self, node) -> list[str]:
        """The nodes ``node`` depends on, in graph order."""
        writers = producers(self.graph)
        seen, frontier = set(), [i for i in node.input if i]
        while frontier:
            writer = writers.get(frontier.pop())
            if writer is not None and writer.name not in seen:
                seen.add(writer.name)
                frontier.extend(i for i in writer.input if i)
        return [n.name for n in self.graph.node if n.name in seen]

    def _upstream_window(self, upstream: list[str]) -> list[str]:
        """The smallest window ``upstream[a:b]`` (by bisection on each end) whose nodes in
        float32 pass with those grown so far; all of ``upstream`` when even that fails (the
        next run's first divergence, further on, then grows the plan again)."""
        def passes(window):
            return bool(window) and self.run(self.grown + window, "narrowing")[0]["status"] == "ok"

        if not passes(upstream):
            return upstream
        far, start = 0, len(upstream)  # upstream[far:] passes, upstream[start:] (empty) does not
        while start - far > 1:
            mid = (far + start) // 2
            far, start = (mid, start) if passes(upstream[mid:]) else (far, mid)
        end, near = far, len(upstream)  # upstream[far:near] passes, upstream[far:end] does not
        while near - end > 1:
            mid = (end + near) // 2
            end, near = (end, mid) if passes(upstream[far:mid]) else (mid, near)
        return upstream[far:near]


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
             f"{len(pruned.units)} of {len(pruned.units) + len(pruned.dropped)} flagged hazards"
             f"{_grown_count(pruned)}; the plan's float16 run {verdict} the check's tolerance"]
    lines += _dropped(pruned, "on these inputs")
    lines += _grown(pruned)
    if pruned.unplanned and not pruned.added:
        lines.append("error starts at nodes no finding covers: " + ", ".join(pruned.unplanned))
    return lines


def _grown(pruned: Pruned) -> list[str]:
    """The header lines naming the regions grown from the runs' first divergences."""
    lines = []
    if pruned.added:
        lines.append(("added" if pruned.passed else "tried, and not written since no plan passed")
                     + " (each where a failing run first left the tolerance, kept in float32): "
                     + "; ".join(pruned.added))
    if pruned.stuck:
        lines.append(f"search stopped: {pruned.stuck}")
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
        return _written(pruned, model, target), notes, lines, pruned
    ref = run_reference(path, input_shapes, seed, model)
    pruned = prune(units, ref, target, tolerance_for(target.dtype))
    pruned.runs = ref.counts["forward"]
    return _written(pruned, model, target), notes, header_lines(pruned, ref, seed), pruned


def _written(pruned: Pruned, model, target):
    """The plan file's plan: the hazards kept, and the grown nodes when a grown plan passed."""
    plan = assemble(pruned.units, model.graph, target)
    return with_grown(plan, pruned.grown, model.graph) if pruned.passed else plan


def _pruned_on_data(units, model, path, target, values):
    """Pruned on each calibration batch; the plan keeps every hazard some batch needs."""
    from ..runtime.data import onnx_batches
    from ..check.onnx.runner import run_reference
    from ..check.tolerance import tolerance_for
    from ..runtime.onnx.inputs import graph_inputs

    kept, passed, runs, batches = set(), True, 0, 0
    grown, added, stuck = [], [], None
    names = [i.name for i in graph_inputs(model)]
    for feeds in onnx_batches(values.data, names, values.batches):
        ref = run_reference(path, None, 0, model, feeds)
        one = prune(units, ref, target, tolerance_for(target.dtype))
        kept |= {u.seed for u in one.units}
        grown += [n for n in one.grown if n not in grown]
        added += [f"batch {batches}: {words}" for words in one.added]
        stuck = stuck or (one.stuck and f"batch {batches}: {one.stuck}")
        passed &= one.passed
        runs += ref.counts["forward"]
        batches += 1
    pruned = Pruned([u for u in units if u.seed in kept], [u for u in units if u.seed not in kept], passed,
                    grown=grown, added=added, stuck=stuck, runs=runs)
    verdict = "passed" if passed else "did NOT pass"
    lines = [f"pruned on --data {values.data} ({batches} batch{'es' * (batches != 1)}, {runs} onnxruntime "
             f"runs): keeps {len(pruned.units)} of {len(units)} flagged hazards, those some batch "
             f"needs{_grown_count(pruned)}; each batch's float16 run with them {verdict} the check's tolerance"]
    return pruned, lines + _dropped(pruned, "on every batch") + _grown(pruned)


def _grown_count(pruned: Pruned) -> str:
    count = len(pruned.grown) if pruned.passed else 0
    return f", and {count} node{'s' * (count != 1)} grown from first divergences" if count else ""


def _dropped(pruned: Pruned, where: str) -> list[str]:
    """The header line naming the hazards the pruning dropped, if any."""
    if not pruned.dropped:
        return []
    return [f"dropped (within tolerance without them {where}): "
            + ", ".join(f"{u.seed} ({'/'.join(sorted(u.rules))})" for u in pruned.dropped)]
