"""``plan --train``: the training entries of a plan, from ``check --train``'s findings.

Each PA304-PA306 finding carries in ``fix["plan"]`` the entries that fix it (written by
check.training_findings from what was measured): ``keep_fp32_modules`` for a norm whose
updates round away in pure mode, ``master_weights: float32`` for updates lost elsewhere and
for an optimizer state that underflows, ``loss_scale: {init}`` for gradients that flush or
steps the scaler skips. This merges them into one plan; ``check --train --plan`` proves it.
"""
from __future__ import annotations

from ..core.findings import Finding
from .file import OverridePlan

TRAINING_RULES = ("PA304", "PA305", "PA306")


def training_plan(findings: list[Finding], target: dict, base: OverridePlan | None = None,
                  rules=TRAINING_RULES) -> OverridePlan:
    """The plan ``base`` (default: an empty one for ``target``) with the training entries
    that fix ``findings``. Master weights make a module kept in fp32 for its updates
    redundant, so with them no module is added to ``keep_fp32_modules``; the largest
    recommended initial loss scale wins (a smaller one only makes GradScaler skip less).
    ``rules``: the findings read (the watch log's PA7xx carry the same ``fix["plan"]``)."""
    plan = base or OverridePlan(target=dict(target))
    keep = list(plan.keep_fp32_modules)
    master, scales = plan.master_weights, []
    findings = [f for f in findings if f.rule in rules]
    for f in findings:
        entries = f.fix.get("plan") or {}
        master = master or entries.get("master_weights")
        if entries.get("loss_scale"):
            scales.append(float(entries["loss_scale"]["init"]))
    if master is None:
        for f in findings:
            for module in (f.fix.get("plan") or {}).get("keep_fp32_modules", ()):
                if module not in keep:
                    keep.append(module)
    return OverridePlan(target=plan.target, overrides=list(plan.overrides), keep_fp32_modules=keep,
                        master_weights=master,
                        loss_scale={"init": max(scales)} if scales else plan.loss_scale,
                        source=plan.source)
