"""``plan --prune`` for PyTorch models: keep only the plan entries the check's runs need.

The static plan keeps every flagged region in fp32: right when nothing is known about the
data, conservative when something is. With the model file's example inputs, ``check``'s
runs settle it: the fp32 reference once, the baseline (no plan), then the static plan, then
the static plan less one unit at a time (a whole override, then one op of an override
that lists several, then a pure-mode ``keep_fp32_modules`` entry), dropping each unit whose
removal still passes the check. A unit is kept only if the run without it fails; the plan
written is the last plan that passed a run (verified by construction), or the whole static plan with a warning when even that does not pass.

What it cannot see: data unlike the example inputs. A region dropped here is one these
inputs do not need, which is the point, and the risk.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

from ..plan.file import OverridePlan


@dataclass
class PrunedPlan:
    plan: OverridePlan  # what is written
    static_entries: int  # overrides + keep_fp32_modules of the static plan
    passed: bool  # whether ``plan`` passed its run
    runs: int  # model forwards, the reference included
    dropped: list[str] = field(default_factory=list)  # units the runs show are not needed
    baseline_status: str = "ok"
    device: str = ""  # where the runs ran (cpu-emulated without a GPU)


def _units(plan: OverridePlan) -> list[tuple]:
    """What can be dropped, coarsest first: whole overrides, then single ops of an override
    that lists several, then pure mode's keep_fp32_modules entries."""
    units = [("override", i) for i in range(len(plan.overrides))]
    units += [("op", i, op) for i, o in enumerate(plan.overrides) if o.ops and len(o.ops) > 1 for op in o.ops]
    return units + [("keep", m) for m in plan.keep_fp32_modules]


def _subplan(plan: OverridePlan, dropped) -> OverridePlan:
    """``plan`` less the ``dropped`` units."""
    overrides = []
    for i, o in enumerate(plan.overrides):
        if ("override", i) in dropped:
            continue
        ops = [op for op in o.ops if ("op", i, op) not in dropped] if o.ops else o.ops
        overrides.append(replace(o, ops=ops) if ops != o.ops else o)
    keep = [m for m in plan.keep_fp32_modules if ("keep", m) not in dropped]
    return replace(plan, overrides=overrides, keep_fp32_modules=keep)


def _name(plan: OverridePlan, unit) -> str:
    if unit[0] == "keep":
        return f"keep_fp32_modules {unit[1]}"
    o = plan.overrides[unit[1]]
    if unit[0] == "op":
        return f"{unit[2]} in {o.module or '<root>'}"
    return (o.module or "<root>") + (f" [{', '.join(o.ops)}]" if o.ops else "")


def prune(plan: OverridePlan, session) -> PrunedPlan:
    """The plan less every unit whose removal (greedily, coarsest first) still passes the
    check on ``session`` (a ``check.pytorch.runner.Session``, reference already run)."""
    units = _units(plan)
    entries = len(plan.overrides) + len(plan.keep_fp32_modules)
    baseline = session.variant("baseline")
    if baseline["status"] == "ok":
        empty = _subplan(plan, set(units))
        return PrunedPlan(empty, entries, True, session.counts["forward"],
                          [_name(plan, u) for u in units if u[0] != "op"], "ok")
    if not units or session.variant("static plan", plan)["status"] != "ok":
        return PrunedPlan(plan, entries, False, session.counts["forward"], [], baseline["status"])
    dropped: list = []
    for unit in units:
        if unit[0] == "op" and ("override", unit[1]) in dropped:
            continue
        trial = [*dropped, unit]
        candidate = _subplan(plan, set(trial))
        if any(o.ops == [] for o in candidate.overrides):
            continue  # an override without ops is the whole-override unit, tried already
        if session.variant(f"without {_name(plan, unit)}", candidate)["status"] == "ok":
            dropped = trial
    return PrunedPlan(_subplan(plan, set(dropped)), entries, True, session.counts["forward"],
                      [_name(plan, u) for u in dropped], baseline["status"])


def header_lines(pruned: PrunedPlan, seed: int) -> list[str]:
    """What the pruning did, for the plan file's header."""
    kept = len(pruned.plan.overrides) + len(pruned.plan.keep_fp32_modules)
    verdict = "passed" if pruned.passed else "did NOT pass"
    lines = [f"pruned on the example inputs (seed {seed}, {pruned.device}, {pruned.runs} model runs "
             f"incl. the fp32 reference; baseline {pruned.baseline_status}): keeps {kept} of "
             f"{pruned.static_entries} entries; this plan's check run {verdict}"]
    if pruned.dropped:
        lines.append("dropped (the check passes without them on these inputs): " + "; ".join(pruned.dropped))
    return lines


def pruned_plan(plan: OverridePlan, path: str, target, seed: int, entry: str, inputs: str,
                device: str = "auto", progress=None, weights: str | None = None) -> PrunedPlan:
    """Run the check's session on the model file (with real ``weights`` when given) and
    prune ``plan`` with it."""
    from ..core.values import ValueOptions
    from ..capture.pytorch.user_code import user_code
    from ..check.pytorch.runner import Session

    with user_code(path, "the model's forward"):  # an exit from the forward is not a verdict
        session = Session(path, target, device, seed=seed, entry=entry, inputs=inputs, progress=progress,
                          values=ValueOptions(weights=weights))
        pruned = prune(plan, session)
    pruned.device = session.runtime.name
    return pruned
