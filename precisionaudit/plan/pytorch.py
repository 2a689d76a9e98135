"""Findings → override plan: the smallest fp32 regions that remove the hazards found.

Op-level entries only: the ops a finding names run in fp32, so the module's large GEMMs
stay in low precision. A module is planned whole only when no finding there names an op
(nor sits at one). A GEMM the findings name where the module runs several calls of it
(attention's ``q @ k^T`` and ``p @ v``) is named by its call order (``matmul#1``), so the
others stay on Tensor Cores. An op near a pole (log, reciprocal, rsqrt) takes the
saturating or cancelling producers of its argument: ``log(1 - sigmoid(x))`` is -inf in
fp32 too once ``1 - sigmoid(x)`` has rounded to 0 in fp16. A fix that repeats across
layers becomes one glob entry (``blocks.*.attn``) when the glob matches exactly the modules
that need it. The output is deterministic: same findings, same file, byte for byte.
"""
from __future__ import annotations

import itertools
import math

from ..core.findings import PLAN_MIN_SEVERITY, PLANNED_ACTIONS, SEVERITY_RANK
from ..core.globs import matches
from ..ir.graph import producers
from ..runtime.pytorch.ops import GEMM_OPS
from . import fp4
from .file import Override, OverridePlan, not_covered


#: the FP8 rules whose finding means "keep this Linear out of FP8" (plan --dtype float8)
FP8_RULES = ("PA601", "PA602", "PA603", "PA604", "PA605")
#: a Linear FP8 GEMMs cannot run at all (PA601): converted unfiltered it fails at its first
#: forward on a GPU, so the plan keeps it out whatever the finding's severity (an output
#: head's is info)
FP8_CANNOT_RUN = "PA601"


def make_plan(findings, target, graph=None, min_severity: str = PLAN_MIN_SEVERITY):
    """(OverridePlan, notes): the plan, and one line per finding it cannot cover."""
    threshold = SEVERITY_RANK[min_severity]
    fp4_kept = fp4.keep_out(findings, graph, min_severity).modules if target.fp4 and graph is not None else []
    findings = [f for f in findings if not (target.fp4 and f.rule in fp4.FP4_RULES)]  # the Linears kept above
    chosen = [f for f in findings if SEVERITY_RANK[f.severity] <= threshold
              or (target.recipe and f.rule == FP8_CANNOT_RUN)]
    regions: dict[str, dict] = {}
    notes = []
    fp8_kept = []
    for f in chosen:
        if target.recipe and f.rule in FP8_RULES:  # a Linear to leave in bf16, not an fp32 region
            if f.module not in fp8_kept:
                fp8_kept.append(f.module)
            continue
        action = (f.fix or {}).get("action")
        if action not in PLANNED_ACTIONS:
            if action:  # a code change (replace, cast the output) or a shape change (pad)
                notes.append(not_covered(f))
            continue
        module = f.fix.get("module", f.module) or ""
        region = regions.setdefault(module, {"ops": [], "whole": False, "rules": {}, "nodes": []})
        ops = list(f.fix.get("ops") or ([f.op] if f.node and f.op else []))
        if not ops:
            region["whole"] = True
        if graph is not None and f.node in graph and f.op in ops:
            ops += pole_producers(graph, f.node)
            ops = [_call_of(graph, f.node, module) if op == f.op else op for op in ops]
        for op in ops:
            if op not in region["ops"]:
                region["ops"].append(op)
        region["rules"].setdefault(f.rule, f.message)
        if f.node:
            region["nodes"].append(f.node)
        for whole in f.fix.get("whole_modules") or ():  # T5's wo, as _keep_in_fp32_modules
            inner = regions.setdefault(whole, {"ops": [], "whole": True, "rules": {}, "nodes": []})
            inner["whole"] = True
            inner["rules"].setdefault(f.rule, f.message)
            if f.node:
                inner["nodes"].append(f.node)

    known = known_modules(graph) if graph is not None else set(regions)
    order = _module_order(graph, known | set(regions))
    entries = []
    for module, region in regions.items():
        region["ops"] = _merged_calls(region["ops"], graph, module)
        region["whole"] = region["whole"] and not region["ops"]  # ops named there: never the whole module
    for pattern, members in _globbed(regions, known, order):
        first = regions[members[0]]
        ops = None if first["whole"] else _in_order(first["ops"], graph)
        rules = {}
        for m in members:
            for rule, message in regions[m]["rules"].items():
                rules.setdefault(rule, message)
        reason = "; ".join(rules[r] for r in sorted(rules))
        entries.append((order.get(members[0], len(order)), pattern,
                        Override(module=pattern, ops=ops, rules=sorted(rules), reason=reason)))
    entries.sort(key=lambda e: (e[0], e[1]))
    keep = []
    if target.mode == "pure":
        owners = {m for region in regions.values() for m in _param_owners(graph, region)}
        keep = [p for p, _ in _globbed({m: {"ops": [], "whole": True} for m in owners}, known, order)]
    plan = OverridePlan(target=target.as_dict(), overrides=[e[2] for e in entries],
                        keep_fp32_modules=sorted(keep, key=lambda p: (order.get(p, len(order)), p)),
                        keep_out_of_fp8=sorted(fp8_kept, key=lambda p: (order.get(p, len(order)), p)),
                        keep_out_of_fp4=fp4_kept)
    return plan, notes


def _in_order(ops, graph) -> list[str]:
    """Ops in the order the forward first runs them (then by name and call number), for a
    readable plan."""
    if graph is None:
        return sorted(ops)
    first = {}
    for i, (_, attrs) in enumerate(graph.nodes(data=True)):
        first.setdefault(attrs["op"], i)

    def key(op):
        name, _, number = op.partition("#")
        return first.get(name, len(first)), name, int(number or 0)
    return sorted(ops, key=key)


# --------------------------------------------------------------------------- which calls
#: ops with a pole at 0: only as exact as their argument
POLE_OPS = frozenset({"log", "log1p", "log2", "log10", "reciprocal", "rsqrt"})
#: producers that round a pole op's argument onto the pole in the low dtype: a function that
#: saturates (sigmoid(9.4) is 1.0 in fp16) and the cancellation after it (1 - p is 0)
SATURATING = frozenset({"sigmoid", "tanh", "softmax", "exp"})
CANCELLING = frozenset({"sub", "rsub", "add"})
#: producers whose result can pass the low dtype's largest value on a pole op's way: a
#: quotient by a clamped divisor (DETR's ``log(x1 / x2)``, x2 >= 1e-5: 1 / 1e-5 is inf in fp16)
OVERFLOWING = frozenset({"div"})


def pole_producers(graph, node) -> list[str]:
    """The ops of a saturating function that computes a pole op's argument in the same
    module, directly or through a cancellation (``[sub, sigmoid]`` for
    ``log(1 - sigmoid(x))``), and a division whose range reaches inf (``div`` for
    ``log(x1 / x2)``); [] for any other op or argument."""
    attrs = graph.nodes[node]
    if attrs["op"] not in POLE_OPS:
        return []

    def same_module(producers_of):
        return [graph.nodes[p] for p in producers(graph, producers_of)
                if graph.nodes[p].get("module", "") == attrs.get("module", "")]
    found = []
    for producer in same_module(node):
        if producer["op"] in SATURATING:
            found.append(producer["op"])
        elif producer["op"] in OVERFLOWING and _overflows(producer):
            found.append(producer["op"])
        elif producer["op"] in CANCELLING:
            saturating = [p["op"] for p in same_module(producer["name"]) if p["op"] in SATURATING]
            found += [producer["op"], *saturating] if saturating else []
    return list(dict.fromkeys(found))


def _overflows(attrs) -> bool:
    """Whether the range pass bounds the op's result at an infinity (the low dtype overflowed)."""
    bounds = getattr(attrs.get("range"), "value_range", None) or ()
    return any(isinstance(b, float) and math.isinf(b) for b in bounds)


def _call_of(graph, node, module: str) -> str:
    """``op#n`` for a GEMM that is the n-th call of its op while ``module`` runs (its
    submodules included), when the module runs several and the call's source location is
    run once (a module called once); the bare op otherwise."""
    attrs = graph.nodes[node]
    op = attrs["op"]
    if op not in GEMM_OPS or not attrs.get("line"):
        return op
    calls = _calls(graph, op, module)
    place = _place(attrs)
    if len(calls) < 2 or sum(_place(a) == place for a in calls) != 1:
        return op
    return f"{op}#{next(i for i, a in enumerate(calls, 1) if a['name'] == node)}"


def _calls(graph, op: str, module: str) -> list[dict]:
    """The nodes of ``op`` that run while ``module`` runs (its submodules' included), in order."""
    def inside(path):
        return not module or path == module or path.startswith(module + ".")
    return [a for _, a in graph.nodes(data=True) if a["op"] == op and inside(a.get("module", ""))]


def _place(attrs) -> tuple:
    return attrs.get("file"), attrs.get("line"), attrs.get("column")


def _merged_calls(ops: list[str], graph, module: str) -> list[str]:
    """Numbered calls of an op named beside the bare op, or all of its calls, are the bare op."""
    numbered: dict[str, set] = {}
    for op in ops:
        name, _, number = op.partition("#")
        if number:
            numbered.setdefault(name, set()).add(int(number))
    every = {name for name, numbers in numbered.items()
             if name in ops or (graph is not None and len(numbers) == len(_calls(graph, name, module)))}
    merged = []
    for op in ops:
        name = op.partition("#")[0]
        op = name if name in every else op
        if op not in merged:
            merged.append(op)
    return merged


def _param_owners(graph, region) -> set[str]:
    """Modules owning the parameters that the region's planned ops read directly."""
    if graph is None:
        return set()
    owners = set()
    for node in region["nodes"]:
        for name, _ in graph.nodes[node].get("params") or []:
            owners.add(name.rpartition(".")[0])
    return owners


# --------------------------------------------------------------------------- modules & globs
def known_modules(graph) -> set[str]:
    """Module paths the capture saw: modules that ran ops, owned parameters, or contain those."""
    paths = {attrs.get("module") or "" for _, attrs in graph.nodes(data=True)}
    paths |= set(graph.graph.get("modules", {}))
    paths |= {name.rpartition(".")[0] for name in graph.graph.get("params", {})}
    ancestors = set()
    for path in paths:
        parts = path.split(".") if path else []
        ancestors |= {".".join(parts[:i]) for i in range(len(parts))}
    return paths | ancestors


def _module_order(graph, modules) -> dict[str, int]:
    """Natural order of module paths: layer 2 before layer 10."""
    def key(path):
        return [(0, int(p), "") if p.isdigit() else (1, 0, p) for p in path.split(".")] if path else []
    return {m: i for i, m in enumerate(sorted(modules, key=key))}


def _globbed(regions: dict, known: set, order: dict):
    """[(pattern, [member modules])]: one glob where the same fix repeats across layers and
    the glob matches no known module that lacks it; literal paths otherwise."""

    def fix_key(module):
        region = regions[module]
        return None if region["whole"] else frozenset(region["ops"])

    remaining = sorted(regions, key=lambda m: (order.get(m, len(order)), m))
    out = []
    while remaining:
        module = remaining[0]
        group = [m for m in remaining if fix_key(m) == fix_key(module)]
        pattern, members = module, [module]
        for candidate in _candidates(module):
            covered = [m for m in known | set(regions) if matches(candidate, m)]
            if len(covered) > 1 and all(m in group for m in covered):
                pattern, members = candidate, sorted(covered, key=lambda m: (order.get(m, 0), m))
                break
        out.append((pattern, members))
        remaining = [m for m in remaining if m not in members]
    return out


def _candidates(module: str):
    """Globs of ``module`` with its numeric components starred, most general first."""
    parts = module.split(".") if module else []
    numeric = [i for i, p in enumerate(parts) if p.isdigit()]
    for size in range(len(numeric), 0, -1):
        for chosen in itertools.combinations(numeric, size):
            yield ".".join("*" if i in chosen else p for i, p in enumerate(parts))


def header(path: str, plan: OverridePlan, target, notes=(), plan_path: str = "amp_plan.yaml",
           value_flags: str = "", findings=(), graph=None, min_severity: str = PLAN_MIN_SEVERITY) -> list[str]:
    """The comment lines at the top of a plan file: what it is and how to apply it
    (``value_flags``: the --weights/--data the plan was made with, for its check command; an
    FP4 plan's forms are made from the ``findings`` and ``graph`` it was made from)."""
    t = target
    flags = "" if t.mode == "autocast" and t.dtype == "float16" else f" --dtype {t.named_dtype} --mode {t.mode}"
    flags += f" --recipe {t.recipe}" if t.fp8_recipe else ""
    flags += value_flags
    judged = f"float8 {t.recipe} recipe: bf16 autocast around FP8 Linears" if t.fp8_recipe else t.dtype
    if t.fp4:
        judged = f"{t.fp4}: bf16 autocast around {t.fp4.upper()} Linears" + (f", --tp {t.tp}" if t.tp > 1 else "")
    lines = [f"precisionaudit override plan for {path} ({judged}, {t.mode}, {t.device})",
             "apply it in training code (the regions run in float32; parameters are untouched):",
             "    import precisionaudit",
             f'    handle = precisionaudit.apply_plan(model, "{plan_path}")  # handle.remove() undoes it',
             f"check it: precisionaudit check {path}{flags} --plan {plan_path}"]
    if plan.keep_out_of_fp8:
        lines += fp8_paste_lines(plan.keep_out_of_fp8)
    if t.fp4 and graph is not None:
        lines += fp4.paste_lines(fp4.keep_out(findings, graph, min_severity), t.fp4)
    if plan.keep_fp32_modules:
        lines.append("pure mode: convert the model with precisionaudit.to_low_precision(model, "
                     f'"{plan_path}") so that keep_fp32_modules keep float32 parameters')
    if notes:
        lines.append("not covered by this plan (needs a change to the model's code):")
        lines.extend(f"    {n}" for n in notes)
    return lines


def fp8_paste_lines(modules) -> list[str]:
    """Header lines that keep ``modules`` out of FP8, ready to paste: a torchao
    module_filter_fn (exact FQNs) and Transformer Engine's list of layers to leave nn.Linear."""
    names = ", ".join(repr(m) for m in modules)
    return ["keep_out_of_fp8 lists the Linears to leave in bf16 (check --dtype float8 --plan emulates that);",
            "torchao (convert_to_float8_training):",
            f"    KEEP_BF16 = {{{names}}}",
            "    convert_to_float8_training(model, module_filter_fn=lambda mod, fqn: fqn not in KEEP_BF16)",
            "Transformer Engine: build these as torch.nn.Linear, the others as te.Linear:",
            f"    [{names}]"]
