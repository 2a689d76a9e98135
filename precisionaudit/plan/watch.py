"""``plan DIR`` for a watch log: the plan the evidence of the user's own run calls for.

Each PA7xx finding carries in ``fix["plan"]`` the entries that fix it: an op-level override
for the first non-finite op (PA701, PA702: the ops from where the low dtype lost the value
to the failing op, in the innermost module whose output is back in range), a module
override for a headroom precursor (PA704), and training entries (``loss_scale``,
``keep_fp32_modules``, ``master_weights``) for a collapsed scale, underflowing gradients,
lost updates and optimizer-state underflow (merged as ``plan --train`` merges them). The
plan file is the one ``apply_plan`` and ``check --plan`` read; its header cites the step,
rank and op the overrides come from.
"""
from __future__ import annotations

from ..core.findings import SEVERITY_RANK, Finding
from ..core.target import DEVICES, DTYPES
from ..core.op_names import GEMM_OPS
from .file import Override, OverridePlan, split_op
from .training import training_plan

WATCH_RULES = tuple(f"PA70{i}" for i in range(1, 10))


def watch_plan(report: dict, findings: list[Finding], path: str,
               min_severity: str = "warning") -> tuple[OverridePlan, list[str]]:
    """(plan, header lines) from a watch log's report and findings at or above ``min_severity``."""
    run = report["run"]
    target = {"dtype": run.get("dtype") if run.get("dtype") in DTYPES else "float16",
              "mode": run.get("mode") or "autocast",
              "device": run.get("device") if run.get("device") in DEVICES else "cuda"}
    chosen = [f for f in findings if SEVERITY_RANK[f.severity] <= SEVERITY_RANK[min_severity]]
    overrides = []
    for f in chosen:
        for entry in (f.fix.get("plan") or {}).get("overrides", ()):
            if not any(o.module == entry["module"] and o.ops == entry.get("ops") for o in overrides):
                overrides.append(Override(module=entry["module"], ops=entry.get("ops"), rules=[f.rule],
                                          reason=_reason(f)))
    plan = training_plan(chosen, target, OverridePlan(target=target, overrides=overrides), rules=WATCH_RULES)
    return plan, _header(report, chosen, path, _linear_share(report, plan, chosen))


def _linear_share(report: dict, plan: OverridePlan, findings: list[Finding]) -> list[str]:
    """The nn.Linear modules the plan's overrides take out of the low dtype, and their share of
    the Linear weights (the GEMM FLOPs a token pays, where every token runs every Linear):
    every Linear of a whole-module entry or of an entry naming a GEMM op, one for ``op#k``
    (the finding's own module). ``check --plan`` measures both on the model."""
    types = report.get("module_types") or {}
    linears = [m for m, kind in types.items() if kind.endswith("Linear")]
    if not linears or not plan.overrides:
        return []
    numels = report.get("parameter_numels") or {}

    def weight(module):
        return numels.get(f"{module}.weight" if module else "weight") or 0

    failing = {f.module for f in findings if f.rule in ("PA701", "PA702")}
    kept = set()
    for o in plan.overrides:
        inside = [m for m in linears if o.module == "" or m == o.module or m.startswith(o.module + ".")]
        ops = o.ops or []
        if o.ops is None or any(op in GEMM_OPS for op in ops):
            kept.update(inside)
        elif any(split_op(op)[0] in GEMM_OPS for op in ops):
            kept.update(m for m in inside if m in failing)
    total = sum(weight(m) for m in linears)
    share = f" ({100 * sum(weight(m) for m in kept) / total:.1f}% of their weights)" if total else ""
    return [f"keeps {len(kept)} of {len(linears)} Linear modules in float32{share}: the rest of the model's "
            "GEMMs stay in the low dtype (check --plan measures both)"]


def _reason(f: Finding) -> str:
    evidence = f.evidence
    if f.rule in ("PA701", "PA702"):
        return (f"first non-finite at step {evidence['step']}, rank {evidence['rank']}: {evidence.get('aten')} "
                f"({evidence['phase']}) in {f.module or '<root>'}")
    return f.message


def _header(report: dict, findings: list[Finding], path: str, share: list[str]) -> list[str]:
    planned = [f for f in findings if f.fix.get("plan")]
    lines = [f"precisionaudit plan {path}: from the watch log of {report['steps']} step(s), world size "
             f"{report['world_size']}; plans for {len(planned)} of {len(findings)} finding(s)"]
    first = report.get("first_nonfinite")
    if first:
        where = first.get("module")
        lines.append(f"first non-finite: step {first['step']}, rank {first['rank']}, {first['phase']}: "
                     f"{first.get('aten')} of {first.get('op')} in {'<root>' if where == '' else where}"
                     f" ({first.get('dtype')})")
        if any(k in (first.get("aten") or "") for k in ("reduce_scatter", "all_reduce", "allreduce")):
            lines.append("the failing op is a gradient reduction: reduce in float32 (FSDP MixedPrecision"
                         "(reduce_dtype=torch.float32); DeepSpeed \"communication_data_type\": \"fp32\")")
    for f in planned:
        lines.append(f"{f.rule} {f.name} ({f.module or '<root>'}): {f.fix.get('to', '')}")
    for f in findings:
        if not f.fix.get("plan"):
            why = ("not a precision failure: float32 gives the same inf/NaN"
                   if f.evidence.get("precision_failure") is False else "no plan entry fixes it")
            lines.append(f"not planned: {f.rule} {f.name} ({f.module or '<root>'}): {why}; {f.fix.get('to', '')}")
    lines += share
    if planned:
        lines.append("apply it with precisionaudit.apply_plan(model, PLAN) and watch the rerun")
    return lines
