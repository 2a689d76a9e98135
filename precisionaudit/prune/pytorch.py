"""``plan --prune`` for PyTorch models: the plan the check's runs show is needed.

The static plan keeps every flagged region in fp32: right when nothing is known about the
data, conservative when something is. With the model file's example inputs, ``check``'s
runs settle it: the fp32 reference once, the baseline (no plan), then the static plan.

When the static plan does not pass (or is empty), the runs grow it from their own evidence:
the op where the first non-finite value appears (else the first that leaves the tolerance,
else the op that raised) is kept in fp32 and the check runs again, up to ``MAX_GROWTH``
regions, each named by module and op. A divergence inside a region already in fp32 has its
cause earlier: the region widens to the op's module, then to each enclosing one. A
divergence with the whole model in fp32 is no region's doing: in pure mode the regions
still read fp16-rounded weights, so the search then keeps the diverging module's weights
in fp32 (``keep_fp32_modules``, with the module a whole region so that its ops read them
in fp32), then each enclosing module's; a divergence with every weight in fp32 as well
ends the search, and its message names the modules whose weights it tried.

Then the plan less one unit at a time (a whole override, then one op of an override that
lists several, then a pure-mode ``keep_fp32_modules`` entry), dropping each unit whose
removal still passes the check. A unit is kept only if the run without it fails; the plan
written is the last plan that passed a run (verified by construction), or the static plan
with a warning (and the regions tried named in its header) when no plan passed.

What it cannot see: data unlike the example inputs. A region dropped here is one these
inputs do not need, which is the point, and the risk.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

from ..core.globs import matches
from ..plan.file import Override, OverridePlan

#: at most this many fp32 regions are added by following the check's first divergence
MAX_GROWTH = 8


@dataclass
class PrunedPlan:
    plan: OverridePlan  # what is written
    static_entries: int  # overrides + keep_fp32_modules of the static plan
    passed: bool  # whether ``plan`` passed its run
    runs: int  # model forwards, the reference included
    dropped: list[str] = field(default_factory=list)  # units the runs show are not needed
    added: list[str] = field(default_factory=list)  # regions the runs' first divergences added
    stuck: str | None = None  # why growing the plan stopped short of a pass
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
    """The plan (grown from the runs' first divergences if it fails) less every unit whose
    removal (greedily, coarsest first) still passes the check on ``session`` (a
    ``check.pytorch.runner.Session``, reference already run)."""
    entries = len(plan.overrides) + len(plan.keep_fp32_modules)
    baseline = session.variant("baseline")
    if baseline["status"] == "ok":
        units = _units(plan)
        return PrunedPlan(_subplan(plan, set(units)), entries, True, session.counts["forward"],
                          [_name(plan, u) for u in units if u[0] != "op"], baseline_status="ok")
    first = session.variant("static plan", plan) if _units(plan) else baseline
    grown, passed, added, stuck = grow(plan, session, first, limit=MAX_GROWTH)
    if not passed:  # the static plan is written; the regions tried are named in its header
        return PrunedPlan(plan, entries, False, session.counts["forward"], baseline_status=baseline["status"],
                          added=added, stuck=stuck)
    plan = grown
    dropped: list = []
    for unit in _units(plan):
        if unit[0] == "op" and ("override", unit[1]) in dropped:
            continue
        trial = [*dropped, unit]
        candidate = _subplan(plan, set(trial))
        if any(o.ops == [] for o in candidate.overrides):
            continue  # an override without ops is the whole-override unit, tried already
        if session.variant(f"without {_name(plan, unit)}", candidate)["status"] == "ok":
            dropped = trial
    return PrunedPlan(_subplan(plan, set(dropped)), entries, True, session.counts["forward"],
                      [_name(plan, u) for u in dropped], baseline_status=baseline["status"], added=added)


def grow(plan: OverridePlan, session, entry: dict, limit: int | None = None, by: str = "plan --prune") -> tuple:
    """(plan, passed, regions added, why it stopped short): while ``entry`` (the run of
    ``plan``) fails, keep its first divergence in fp32 and run again. A divergence already
    inside an fp32 region is caused before it: the region widens to the op's whole module,
    then to each enclosing module in turn; in pure mode, past the root, the diverging
    module's weights (then each enclosing module's) are kept in fp32. At most ``limit``
    regions are added (None: until the whole model is in float32); ``by`` names the command
    in the reasons the added entries give."""
    added, kept = [], []
    pure = session.target.mode == "pure"
    while entry["status"] != "ok":
        where = entry.get("first_divergence")
        if where is None:
            return plan, False, added, "the outputs leave the tolerance but no op or module does first"
        module = "" if where["module"] in ("<root>", None) else where["module"]
        region = _next_region(plan, module, where["op"])
        weights = _next_weights(plan, module) if region is None and pure else None
        if region is None and weights is None:
            cause = f"raises ({entry['error']})" if entry.get("error") else f"still diverges ({where['kind']})"
            place = f"{where['op']} in {module or '<root>'}" if where["op"] else f"the output of {module or '<root>'}"
            tried = (f" and float32 weights in {', '.join(m or '<root>' for m in kept)} (keep_fp32_modules)"
                     if kept else "")
            fixes = "no float32 region or weight fixes this" if pure else "no float32 region fixes this"
            return plan, False, added, f"{place} {cause} with the whole model in float32{tried}: {fixes}"
        name = (f"keep_fp32_modules {weights or '<root>'}" if region is None else
                f"{region[1][0]} in {region[0] or '<root>'}" if region[1] else f"{region[0] or '<root>'} (whole)")
        if len(added) == limit:
            return plan, False, added, f"still failing after {limit} added regions (next: {name})"
        reason = f"{by}: the check's first divergence ({where['kind']})"
        if region is None:
            plan, kept = _with_weights(plan, weights, reason), [*kept, weights]
        else:
            plan = replace(plan, overrides=[*plan.overrides, Override(region[0], region[1], reason=reason)])
        added.append(name)
        entry = session.variant(f"plus {name}", plan)
    return plan, True, added, None


def _next_weights(plan: OverridePlan, module: str) -> str | None:
    """The innermost of ``module`` and its enclosing modules whose weights ``plan`` does not
    keep in fp32 yet (a kept module keeps its submodules'); None when the root's are."""
    parts = module.split(".") if module else []
    paths = [".".join(parts[:n]) for n in range(len(parts) + 1)]  # the root first

    def kept(i):
        return any(matches(pattern, outer) for pattern in plan.keep_fp32_modules for outer in paths[:i + 1])
    return next((paths[i] for i in range(len(paths) - 1, -1, -1) if not kept(i)), None)


def _with_weights(plan: OverridePlan, module: str, reason: str) -> OverridePlan:
    """``plan`` keeping ``module``'s weights in fp32, the module a whole region (its ops read
    them in fp32; a low-precision input would not meet an fp32 weight)."""
    overrides = plan.overrides
    if not any(o.module == module and o.ops is None for o in overrides):
        overrides = [*overrides, Override(module, None, reason=reason)]
    return replace(plan, overrides=overrides, keep_fp32_modules=[*plan.keep_fp32_modules, module])


def _next_region(plan: OverridePlan, module: str, op: str | None):
    """(module, ops) of the smallest region around ``op`` in ``module`` not yet in fp32:
    the op, else its whole module, else each enclosing module; None when the root is."""
    parts = module.split(".") if module else []
    wider = [(".".join(parts[:n]), None) for n in range(len(parts), -1, -1)]
    for candidate in ([(module, [op])] if op else []) + wider:
        if not _in_fp32(plan, *candidate):
            return candidate
    return None


def _in_fp32(plan: OverridePlan, module: str, ops: list | None) -> bool:
    """Whether a region of ``plan`` already runs ``ops`` (None: all) of ``module`` in fp32:
    the same op of the same module, or the whole module or one enclosing it."""
    def encloses(outer):
        return outer == "" or module == outer or module.startswith(outer + ".")
    return any((o.ops is None and encloses(o.module))
               or (ops is not None and o.module == module and o.ops and set(ops) <= set(o.ops))
               for o in plan.overrides if o.module is not None)


@dataclass
class CheckedPlan:
    """``plan --data``'s plan, checked on the data and grown where it failed."""
    plan: OverridePlan  # what is written: the grown plan when it passed, else the one made
    passed: bool
    runs: int  # model forwards, the reference included
    failed: str | None = None  # how the plan as made failed ("nonfinite at attn · matmul, batch 0")
    added: list[str] = field(default_factory=list)  # regions the failing runs' first divergences added
    stuck: str | None = None  # why growing stopped short of a pass
    device: str = ""

    def header_lines(self, data: str) -> list[str]:
        """What the check on the data found and what growing the plan did, for its header."""
        where = f"checked on --data {data} ({self.device}, {self.runs} model runs incl. the fp32 reference)"
        if self.failed is None:
            return [f"{where}: passed"]
        lines = [f"{where}: the plan made from the findings did not pass ({self.failed})"]
        if self.passed:
            lines.append("grown until it passed, adding (each the first divergence of a failing run, kept in "
                         "float32): " + "; ".join(self.added))
        else:
            lines.append("grown (each the first divergence of a failing run, kept in float32; not written, "
                         "since no plan passed): " + ("; ".join(self.added) or "nothing"))
            lines.append(f"growing stopped: {self.stuck}")
        return lines


def checked_plan(plan: OverridePlan, path: str, target, seed: int, load=None, device: str = "auto",
                 progress=None, values=None) -> CheckedPlan:
    """``plan`` checked on each batch of ``values`` (--data, with --weights when given); where a
    batch fails, grown from the failing runs' first divergences (``grow``, no limit: until it
    passes or the whole model is in float32) before the next batch."""
    from ..check.pytorch.runner import Session
    from ..runtime.pytorch.user_code import user_code
    from ..runtime.sources import DEFAULT_LOAD

    made, added, failed = plan, [], None
    with user_code(path, "the model's forward"):  # an exit from the forward is not a verdict
        session = Session(path, target, device, seed=seed, load=load or DEFAULT_LOAD, progress=progress,
                          values=values)
        while True:
            entry = session.variant("planned", plan)
            if entry["status"] != "ok":
                if failed is None:
                    divergence = entry.get("first_divergence") or {}
                    at = " · ".join(x for x in (divergence.get("module"), divergence.get("op")) if x)
                    failed = f"{entry['status']}{f' at {at}' if at else ''}, batch {session.index}"
                plan, passed, more, stuck = grow(plan, session, entry, by="plan --data")
                added += more
                if not passed:
                    return CheckedPlan(made, False, session.counts["forward"], failed, added, stuck,
                                       session.runtime.name)
            if not session.next_batch():
                return CheckedPlan(plan, True, session.counts["forward"], failed, added,
                                   device=session.runtime.name)


def header_lines(pruned: PrunedPlan, seed: int) -> list[str]:
    """What the pruning did, for the plan file's header."""
    kept = len(pruned.plan.overrides) + len(pruned.plan.keep_fp32_modules)
    verdict = "passed" if pruned.passed else "did NOT pass"
    grown = f" + {len(pruned.added)} added" if pruned.added and pruned.passed else ""
    lines = [f"pruned on the example inputs (seed {seed}, {pruned.device}, {pruned.runs} model runs "
             f"incl. the fp32 reference; baseline {pruned.baseline_status}): keeps {kept} of "
             f"{pruned.static_entries}{grown} entries; this plan's check run {verdict}"]
    if pruned.added:
        lines.append(("added" if pruned.passed else "tried, and not written since no plan passed")
                     + " (each the first divergence of a failing run, kept in float32): " + "; ".join(pruned.added))
    if pruned.stuck:
        lines.append(f"search stopped: {pruned.stuck}")
    if pruned.dropped:
        lines.append("dropped (the check passes without them on these inputs): " + "; ".join(pruned.dropped))
    return lines


def pruned_plan(plan: OverridePlan, path: str, target, seed: int, load=None, device: str = "auto",
                progress=None, weights: str | None = None) -> PrunedPlan:
    """Run the check's session on the model ``path`` names, loaded with ``load`` (with real
    ``weights`` when given), and prune ``plan`` with it."""
    from ..check.pytorch.runner import Session
    from ..core.values import ValueOptions
    from ..runtime.pytorch.user_code import user_code
    from ..runtime.sources import DEFAULT_LOAD

    with user_code(path, "the model's forward"):  # an exit from the forward is not a verdict
        session = Session(path, target, device, seed=seed, load=load or DEFAULT_LOAD, progress=progress,
                          values=ValueOptions(weights=weights))
        pruned = prune(plan, session)
    pruned.device = session.runtime.name
    return pruned
