"""Findings of ``check --train`` (PA304-PA306) from its measured variants, in the scan's schema.

The measures (check.pytorch.train_measures) are per parameter and per module; a rule fires
on a module when its measure passes the rule's ``params`` threshold. The message and fix
come from the rule YAML (strict templates, as every bundled rule); ``fix["plan"]`` holds the
plan entries that fix it, which ``plan --train`` (plan.training) merges into a plan.
Kept free of torch: it reads the report's numbers only.
"""
from __future__ import annotations

import math

from ..core.findings import Finding, fingerprint_all
from ..rules.engine import format_template, load_rules

#: stored significand bits: half an ulp of w is 2^(floor(log2 |w|) - bits - 1)
SIGNIFICAND_BITS = {"float16": 10, "bfloat16": 7, "float32": 23}
#: smallest positive subnormal: a value below half of it rounds to 0
SMALLEST_SUBNORMAL = {"float16": 2.0 ** -24, "bfloat16": 2.0 ** -133, "float32": 2.0 ** -149}
TRAINING_RULES = ("PA304", "PA305", "PA306")
#: the per-module measure (``modules[]`` key) each rule reads: its findings' ``evidence.measure``;
#: PA306's skipped-steps case reads the loss scale (``loss_scale``) instead
MEASURES = {"PA304": "updates_lost", "PA305": "state_underflow", "PA306": "grad_flushed"}
MASTER = {"master_weights": "float32"}


def half_ulp(value: float, dtype: str) -> float:
    if not value:
        return SMALLEST_SUBNORMAL[dtype] / 2
    return 2.0 ** (math.floor(math.log2(abs(value))) - SIGNIFICAND_BITS[dtype] - 1)


def training_findings(variants: list, target: dict, path: str, model: str, rules=None,
                      gradients: dict | None = None) -> list[Finding]:
    """The findings of the baseline run (what users run today); each other low-precision
    variant gets its own under ``variant["findings"]`` (a plan that works leaves none)."""
    rules = {r.id: r for r in (rules if rules is not None else load_rules(checks=False))
             if r.id in TRAINING_RULES}
    found = []
    for variant in variants:
        if variant["name"] == "reference":
            continue
        mine = _of_variant(variant, target, path, model, rules, gradients or {})
        fingerprint_all(mine)
        variant["findings"] = [f.to_json() for f in mine]
        if variant["name"] == "baseline":
            found = mine
    return found


def _of_variant(variant, target, path, model, rules, gradients) -> list[Finding]:
    found = []
    params = variant.get("parameters", [])
    for module in variant.get("modules", []):
        rows = [p for p in params if p["module"] == module["module"]]
        for rule_id, hit in (("PA304", _lost(module, rows, variant, target, rules.get("PA304"))),
                             ("PA305", _state(module, rows, variant, rules.get("PA305"))),
                             ("PA306", _flushed(module, rows, variant, target, rules.get("PA306"), gradients))):
            if hit is not None:
                found.append(_finding(rules[rule_id], path, model, module, variant, *hit))
    skipped = _skipped(variant, target, rules.get("PA306"), gradients)
    if skipped is not None:
        found.append(_finding(rules["PA306"], path, model, {"module": "", "type": "", "parameters": []},
                              variant, *skipped))
    return found


def _finding(rule, path, model, module, variant, case, values, plan_entries) -> Finding:
    values = {"module": module["module"] or "<root>", "type": module["type"], "dtype": variant["dtype"],
              "parameters": ", ".join(values.pop("names", module["parameters"])), **values}
    fix = {k: format_template(rule, v, values) if isinstance(v, str) else v for k, v in rule.fix.items()}
    fix["plan"] = plan_entries
    evidence = {k: v for k, v in values.items() if not k.endswith("_text") and k not in ("module", "type")}
    evidence.update(variant=variant["name"], case=case, module_type=module["type"],
                    measure="loss_scale" if case == "skipped" else MEASURES[rule.id])
    return Finding(rule=rule.id, name=rule.name, severity=rule.severity_for(variant["dtype"], case),
                   path=path, line=None, model=model, node=None, op=values["parameters"] or None,
                   module=module["module"], message=format_template(rule, rule.message, values),
                   evidence=evidence, fix=fix)


def _percent(share: float) -> str:
    return f"{100 * share:.0f}%" if share >= 0.01 else f"{100 * share:.2g}%"


# --------------------------------------------------------------------------- PA304
def _lost(module, rows, variant, target, rule):
    """PA304 on the module's low-precision parameters whose own share of lost updates passes
    the threshold; the share reported is pooled over those parameters."""
    if rule is None:
        return None
    rows = [r for r in rows if r["dtype"] != "float32" and (r["updates_lost"] or 0) >= rule.params["share"]]
    if not rows:
        return None
    share = sum(r["lost"] for r in rows) / max(1, sum(r["eligible"] for r in rows))
    never = sum(r["never"] for r in rows) / max(1, sum(r["moved"] for r in rows))
    worst = max(rows, key=lambda r: r["updates_lost"])
    dtype = worst["dtype"]
    weight = worst["weight_abs"] or 0.0
    norm = "norm" in module["type"].lower()
    if norm and target["mode"] == "pure":
        entries = {"keep_fp32_modules": [module["module"]]}
        fix_text = (f"keep {module['module']} in float32 (plan --train: keep_fp32_modules), or step "
                    "float32 master weights (master_weights: float32)")
    else:
        entries = dict(MASTER)
        fix_text = ("step float32 master weights (plan --train: master_weights: float32), or use an "
                    "optimizer with stochastic rounding")
    values = {"names": [r["parameter"].rpartition(".")[2] for r in rows], "share": share,
              "share_text": _percent(share), "never_moved": never, "never_text": _percent(never),
              "lr": worst["lr"] or 0.0, "weight_abs": weight, "update_abs": worst["update_abs"] or 0.0,
              "half_ulp": half_ulp(weight, dtype), "dtype": dtype, "fix_text": fix_text}
    case = "stalled" if share >= rule.params["stalled"] else "partial"
    return case, values, entries


# --------------------------------------------------------------------------- PA305
def _state(module, rows, variant, rule):
    if rule is None or variant.get("optimizer_state_dtype") in (None, "float32"):
        return None
    state_dtype = variant["optimizer_state_dtype"]
    eps = variant.get("eps")
    first = variant.get("first_nonfinite") or {}
    eps_lost = eps is not None and eps < SMALLEST_SUBNORMAL.get(state_dtype, 0.0) / 2
    fix_text = "keep the optimizer state in float32: step float32 master weights (plan --train: master_weights: float32)"
    if eps_lost and first.get("module") == module["module"]:
        zero = max((r["state_zero"] or 0.0) for r in rows) if rows else 0.0
        if zero > 0:
            values = {"state_text": f"exp_avg_sq is 0 in {_percent(zero)} of the elements and eps={eps:g} "
                                    f"rounds to 0 in {state_dtype}",
                      "consequence": f"sqrt(exp_avg_sq) + eps is 0, the update divides by 0 and "
                                     f"{first['what']} is inf/NaN at step {first['step']}",
                      "state_zero": zero, "eps": eps, "step": first["step"], "fix_text": fix_text,
                      "dtype": state_dtype}
            return "eps", values, dict(MASTER)
    share = module.get("state_underflow") or 0.0
    if share < rule.params["share"]:
        return None
    names = [r["parameter"].rpartition(".")[2] for r in rows if (r["state_underflow"] or 0) >= rule.params["share"]]
    bad = variant["status"] in ("nonfinite", "diverges")
    if first.get("step") is not None:
        consequence = (f"the update divides by eps={eps:g} alone and the run is inf/NaN at step {first['step']}"
                       if eps is not None else f"the run is inf/NaN at step {first['step']}")
    elif bad:
        consequence = (f"the update divides by eps={eps:g} alone, steps grow by orders of magnitude and the "
                       f"run diverges (drift {variant['drift']:.3g} of float32's movement)")
    else:
        consequence = "those elements' steps are set by eps, not by their gradient"
    values = {"names": names, "state_text": f"exp_avg_sq is 0 or subnormal in {_percent(share)} of the elements "
                                            "where float32's is normal",
              "consequence": consequence, "share": share, "eps": eps, "fix_text": fix_text, "dtype": state_dtype}
    return ("diverged" if bad else "underflow"), values, dict(MASTER)


# --------------------------------------------------------------------------- PA306
def _scale_entries(variant, target, gradients) -> tuple[dict, float]:
    init = float(gradients.get("recommended_init_scale") or 2.0 ** 16)
    entries = {"loss_scale": {"init": init}}
    if target["mode"] == "pure" and variant.get("master_weights") is None:
        entries.update(MASTER)  # GradScaler refuses fp16 gradients
    return entries, init


def _flushed(module, rows, variant, target, rule, gradients):
    if rule is None or variant["dtype"] != "float16":
        return None
    share = module.get("grad_flushed") or 0.0
    if share < rule.params["share"]:
        return None
    scale = (variant.get("loss_scale") or {}).get("init") or 1.0
    entries, init = _scale_entries(variant, target, gradients)
    names = [r["parameter"].rpartition(".")[2] for r in rows if (r["grad_flushed"] or 0) >= rule.params["share"]]
    what = (f"{_percent(share)} of the gradient elements of {module['module'] or '<root>'} ({', '.join(names)}) "
            f"are 0 in float16 at loss scale {scale:g} where float32's are not: those weights stop learning")
    fix_text = f"scale the loss: torch.amp.GradScaler(init_scale={init:g}) (plan --train: loss_scale init {init:g})"
    return "flushed", {"names": names, "what_text": what, "share": share, "scale": scale, "fix_text": fix_text,
                       "recommended_init_scale": init}, entries


def _skipped(variant, target, rule, gradients):
    scaler = variant.get("loss_scale")
    if rule is None or not scaler or not scaler.get("skipped_steps"):
        return None
    skipped, steps = scaler["skipped_steps"], len(scaler["trajectory"])
    after_success = any(i > 0 and (i - 1) not in skipped for i in skipped)
    if not after_success and len(skipped) < rule.params["skipped"] * steps:
        return None  # the scaler's calibration at the start: documented GradScaler behaviour
    entries, init = _scale_entries(variant, target, gradients)
    what = (f"GradScaler skipped {len(skipped)} of {steps} steps (steps {', '.join(map(str, skipped[:10]))}"
            f"{', ...' if len(skipped) > 10 else ''}): inf/NaN gradients at scale {scaler['init']:g}, "
            f"the scale went down to {min(scaler['trajectory']):g}")
    fix_text = (f"start GradScaler at a scale the gradients fit: init_scale={init:g} "
                f"(plan --train: loss_scale init {init:g})")
    return "skipped", {"names": [], "what_text": what, "skipped_steps": skipped, "scale": scaler["init"],
                       "fix_text": fix_text, "recommended_init_scale": init}, entries
