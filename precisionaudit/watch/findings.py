"""The findings of a watch log (PA701-PA709) in the scan's finding schema.

Its own stage (``watch.findings``, beside ``training``): it reads the report ``log.summarize``
made and the rules' YAML (messages, thresholds), never torch. Each finding's ``evidence``
holds the step and rank it comes from; ``fix["plan"]`` the plan entries that fix it, which
``plan.watch`` merges into one plan.
"""
from __future__ import annotations

import math

from ..core.findings import Finding, fingerprint_all
from ..core.numerics import LARGEST_FINITE
from ..rules.engine import format_template, load_rules
from .log import number

MASTER = {"master_weights": "float32"}


def _percent(share: float) -> str:
    return f"{100 * share:.0f}%" if share >= 0.01 else f"{100 * share:.2g}%"


def _module_text(module) -> str:
    return "the loss outside the model" if module is None else (module or "<root>")


class _Findings:
    def __init__(self, report: dict, path: str, rules: dict):
        self.report, self.path, self.rules, self.found = report, path, rules, []

    def add(self, rule_id: str, module, values: dict, op=None, case=None, fix=None, plan=None):
        rule = self.rules.get(rule_id)
        if rule is None:
            return
        values = {"module_text": _module_text(module), **values}
        fix = dict(fix or {k: format_template(rule, v, values) if isinstance(v, str) else v
                           for k, v in rule.fix.items()})
        if plan:
            fix["plan"] = plan
        evidence = {k: v for k, v in values.items() if not k.endswith("_text")}
        evidence["case"] = case
        self.found.append(Finding(
            rule=rule.id, name=rule.name, severity=rule.severity_for(self.report["run"].get("dtype") or "", case),
            path=self.path, line=None, model=f"{self.path}:watch", node=None, op=op, module=module or "",
            message=format_template(rule, rule.message, values), evidence=evidence, fix=fix))


def watch_findings(report: dict, path: str, rules=None) -> list[Finding]:
    """The findings of the report of the log at ``path`` (``rules``: the catalog to take the
    PA7xx rules from; default the bundled one)."""
    rules = {r.id: r for r in (rules if rules is not None else load_rules(checks=False)) if r.id.startswith("PA7")}
    found = _Findings(report, path, rules)
    _first_nonfinite(found, report)
    _unattributed(found, report)
    collapsed = _scale(found, report)
    _headroom(found, report)
    if not collapsed:
        _underflow(found, report)
    _parameters(found, report)
    _hidden_losses(found, report)
    _ranks(found, report)
    fingerprint_all(found.found)
    return found.found


# --------------------------------------------------------------------------- PA701 / PA702
def _first_nonfinite(found: _Findings, report: dict) -> None:
    first = report.get("first_nonfinite")
    if not first:
        return
    region = first.get("region") or {}
    fp32 = first.get("fp32_finite")
    # float32 from the same inputs is not finite either, and no earlier op lost the value in the
    # low dtype: no precision makes it finite (a 0/0, a log(0)); no override is written for it
    not_precision = fp32 is False and not region and first["phase"] in ("forward", "backward")
    if not_precision:
        fp32_text = (f"this is not a precision failure: float32 gives the same inf/NaN from the same inputs "
                     f"({_operation(first)})")
    elif first["phase"] == "input":
        fp32_text = f"its input, {first.get('input')}, was already inf/NaN: no op of the step made it"
    elif fp32 is True:
        fp32_text = "in float32 from the same inputs it stays finite"
    elif fp32 is False and region.get("origin"):
        origin = region["origin"]
        fp32_text = (f"in float32 from the same inputs it is not finite either: its input was already lost "
                     f"when {origin['op']} in {origin['module'] or '<root>'} {origin['lost']} in the low dtype")
    elif fp32 is False:
        fp32_text = "in float32 from the same inputs it is not finite either"
    else:
        fp32_text = "it was not rerun in float32"
    plan, fix = None, None
    if not_precision:
        fix_text = f"{_guard(first.get('op'))} (no float32 override fixes it)"
        fix = {"action": "edit", "to": fix_text}
    elif region.get("ops") and first["phase"] != "loss":
        plan = {"overrides": [{"module": region["module"], "ops": region["ops"]}]}
        fix_text = (f"keep {', '.join(region['ops'])} in float32 in {region['module'] or '<root>'} "
                    f"(precisionaudit plan {found.path})")
    elif first["phase"] == "input":
        fix_text = f"find where {first.get('input')} became inf/NaN (a checkpoint, an earlier update)"
    else:
        fix_text = "look at the loss and its scaling outside the model"
    micro = first.get("micro_batches") or 1
    values = {"step": first["step"], "rank": first["rank"], "op": first.get("op"), "aten": first.get("aten"),
              "micro_batch": first.get("micro_batch"), "micro_batches": micro,
              "micro_text": f", micro-batch {first['micro_batch'] + 1} of {micro}" if micro > 1 else "",
              "dtype": first.get("dtype"), "inputs_text": "/".join(dict.fromkeys(first.get("input_dtypes") or []))
              or "no", "fp32_text": fp32_text, "fix_text": fix_text, "phase": first["phase"],
              "fp32_finite": fp32, "region": region, "reduction": _is_reduction(first.get("aten")),
              "operands": first.get("operands"), "precision_failure": not not_precision}
    if first["phase"] in ("forward", "input"):
        found.add("PA701", first.get("module"), values, op=first.get("op"), plan=plan, fix=fix)
    else:
        values["node_text"] = (f"the gradient of {first['op']}, {first['node']}" if first.get("node")
                               else "outside the model" if first["phase"] == "loss" else "a backward op")
        found.add("PA702", first.get("module"), values, op=first.get("op"), plan=plan, fix=fix)


#: what guards an op's operands where float32 is no fix, by the op's family
_GUARDS = {
    "log": "guard the argument of the log: x.clamp_min(eps).log(), or a form that cannot meet 0 "
           "(F.logsigmoid(z) for log(sigmoid(z)), log_softmax for log(softmax))",
    "div": "guard the denominator (clamp_min(eps)), and mask the empty rows before a masked mean (a row "
           "with nothing in it is 0/0)",
    "exp": "subtract the maximum first (softmax, logsumexp) or clamp the argument: exp passes float32's "
           "largest value beyond 88.7 too",
    "sqrt": "clamp the argument to >= 0 (or add eps) before the root",
}
_FAMILY = {"log": "log", "log2": "log", "log10": "log", "log1p": "log", "xlogy": "log", "log_softmax": "log",
           "div": "div", "true_divide": "div", "reciprocal": "div", "mean": "div", "nanmean": "div",
           "floor_divide": "div", "exp": "exp", "expm1": "exp", "exp2": "exp", "softplus": "exp",
           "sqrt": "sqrt", "rsqrt": "sqrt", "pow": "sqrt"}


def _guard(op) -> str:
    return _GUARDS.get(_FAMILY.get(op or ""), "guard the op's operands where they are made (clamp_min, masking "
                                                "the empty rows)")


def _operation(first: dict) -> str:
    """'div(0, 0)', 'log(0)', 'exp(312.5)': the op and its operands at the first inf/NaN."""
    operands = first.get("operands")
    if operands is None:
        return f"{first.get('op')} of the same values"
    return f"{first.get('op')}({', '.join(f'{v:.4g}' for v in operands)})"


def _unattributed(found: _Findings, report: dict) -> None:
    """PA710: a non-finite loss the replay named no op for (it stayed finite, did not run, or
    failed): a run whose loss went NaN is never a clean log."""
    if report.get("first_nonfinite"):
        return
    bad = sorted((steps["nonfinite_steps"][0], int(rank)) for rank, steps in report["loss"].items()
                 if steps["nonfinite_count"])
    if not bad:
        return
    step, rank = bad[0]
    trigger = next((t for t in report["triggers"] if t["step"] >= step), None)
    errors = (trigger or {}).get("errors") or []
    if trigger is None or not trigger["replayed"]:
        replay_text, replay = "it was not replayed (no forward of the watched model to replay)", "not run"
    elif errors:
        replay_text, replay = f"its replay failed ({errors[0]})", errors[0]
    else:
        replay_text, replay = ("its replay stayed finite: the inf/NaN was made outside the replayed forward and "
                               "backward of the watched model"), "finite"
    skipped = step in ((report.get("scaler") or {}).get("skipped") or [])
    found.add("PA710", "", {"step": step, "rank": rank, "replay": replay, "replay_text": replay_text,
                            "skipped": skipped, "skip_text": " and the scaler skipped its update" if skipped else "",
                            "fix_text": "look at what computes the loss outside the model the watch was given (a "
                                        "loss function, a second model), and at the batch of that step; watch the "
                                        "module that computes the loss to have its op named"})


def _is_reduction(aten) -> bool:
    return bool(aten) and any(k in aten for k in ("reduce_scatter", "all_reduce", "allreduce"))


# --------------------------------------------------------------------------- PA703
def _scale(found: _Findings, report: dict) -> bool:
    """PA703 when the scaler collapsed; True when it did (the underflow that follows is its
    consequence, not reported apart)."""
    scaler = report.get("scaler")
    rule = found.rules.get("PA703")
    if not scaler or rule is None or not scaler["skipped_steps"]:
        return False
    params = rule.params
    smallest = min(x for x in (scaler.get("min_scale"), scaler.get("final_scale")) if x is not None) \
        if scaler.get("min_scale") is not None or scaler.get("final_scale") is not None else None
    steps = max(1, report["steps"])
    if smallest is not None and smallest < params["min_scale"]:
        case = "collapsed"
    elif scaler["longest_skip_streak"] >= params["streak"]:
        case = "streak"
    elif scaler["skipped_steps"] >= params["share"] * steps and steps >= 20:
        case = "frequent"
    else:
        return False
    skipped = scaler.get("skipped") or []
    first = report.get("first_nonfinite")
    what = (f"the loss scaler skipped {scaler['skipped_steps']} of {report['steps']} steps (steps "
            f"{', '.join(map(str, skipped[:10]))}{', ...' if len(skipped) > 10 else ''}; longest streak "
            f"{scaler['longest_skip_streak']}), its scale went from {scaler.get('init_scale') or 0:g} down to "
            f"{smallest if smallest is not None else 0:g}: those steps trained nothing")
    if scaler.get("skip_modules"):
        what += f"; inf/NaN gradients in {', '.join(scaler['skip_modules'][:5])}"
    rule_of_first = f"PA70{'1' if first and first['phase'] == 'forward' else '2'}"
    if first and (first.get("region") or {}).get("ops"):
        region = first["region"]
        fix_text = (f"the gradients are inf/NaN at any scale: the plan keeps {', '.join(region['ops'])} of "
                    f"{region['module'] or '<root>'} in float32 (see {rule_of_first})")
        plan = None
    elif first and first.get("fp32_finite") is False and first["phase"] in ("forward", "backward"):
        fix_text = (f"the gradients are inf/NaN at any scale and in float32 too: not a precision failure, no "
                    f"loss scale or float32 region fixes it (see {rule_of_first})")
        plan = None
    else:
        fix_text = "start the scaler at a scale the gradients fit (plan: loss_scale init)"
        plan = {"loss_scale": {"init": _fitting_scale(report)}}
    values = {"what_text": what, "fix_text": fix_text, "skipped_steps": scaler["skipped_steps"],
              "longest_skip_streak": scaler["longest_skip_streak"], "final_scale": scaler.get("final_scale"),
              "min_scale": smallest, "skip_modules": scaler.get("skip_modules", []), "step": skipped[0] if skipped else None}
    found.add("PA703", "", values, case=case, plan=plan)
    return case == "collapsed" or case == "streak"


def _fitting_scale(report: dict) -> float:
    """The largest power of two (at most 2^16) that keeps the largest sampled gradient
    finite in float16."""
    largest = max([m.get("grad_absmax") or 0.0 for m in report["modules"].values()
                   if m.get("grad_absmax") is not None and math.isfinite(m["grad_absmax"])] + [0.0])
    if not largest:
        return 2.0 ** 16
    return float(2.0 ** max(0, min(16, math.floor(math.log2(LARGEST_FINITE["float16"] / largest)))))


# --------------------------------------------------------------------------- PA704 / PA705
def _headroom(found: _Findings, report: dict) -> None:
    rule = found.rules.get("PA704")
    if rule is None:
        return
    for name, stats in report["modules"].items():
        dtype, share = stats.get("dtype"), stats.get("headroom")
        if dtype not in ("float16", "bfloat16") or share is None or not math.isfinite(share):
            continue
        if share >= rule.params["share"] and share <= 1.0:
            values = {"absmax": stats["forward_absmax"], "step": stats.get("headroom_step"),
                      "rank": stats.get("headroom_rank"), "share": share, "share_text": _percent(share),
                      "dtype": dtype, "largest": LARGEST_FINITE[dtype],
                      "fix_text": f"keep {name or '<root>'} in float32 (plan: an override of the module), or "
                                  "bound its values (a norm before it)"}
            found.add("PA704", name, values, plan={"overrides": [{"module": name}]})


def _underflow(found: _Findings, report: dict) -> None:
    rule = found.rules.get("PA705")
    if rule is None:
        return
    for name, stats in report["modules"].items():
        share = stats.get("grad_underflow_share")
        if share is None or share < rule.params["share"]:
            continue
        scale = stats.get("scale") or 1.0
        init = _fitting_scale(report)
        values = {"share": share, "share_text": _percent(share), "scale": scale, "step": stats.get("step"),
                  "rank": stats.get("rank"),
                  "fix_text": f"use a dynamic GradScaler starting at {init:g} (plan: loss_scale init {init:g})"}
        found.add("PA705", name, values, plan={"loss_scale": {"init": init}})


# --------------------------------------------------------------------------- PA706 / PA709
def _parameters(found: _Findings, report: dict) -> None:
    _lost_updates(found, report)
    state_rule = found.rules.get("PA709")
    if state_rule is None:
        return
    by_module: dict = {}
    for name, stats in report["parameters"].items():
        by_module.setdefault(stats.get("module", name.rpartition(".")[0]), []).append((name, stats))
    for module, rows in by_module.items():
        under = [(n, s) for n, s in rows if (s.get("state_underflow_share") or 0) >= state_rule.params["share"]]
        if under:
            share = max(s["state_underflow_share"] for _, s in under)
            values = {"share": share, "share_text": _percent(share), "state_dtype": under[0][1].get("state_dtype"),
                      "parameters": ", ".join(n.rpartition(".")[2] for n, _ in under),
                      "step": under[0][1].get("step"), "rank": under[0][1].get("rank")}
            found.add("PA709", module, values, plan=dict(MASTER))


#: the parameters a PA706 message names before "and N more" (its evidence lists them all)
NAMED = 6


def _lost_updates(found: _Findings, report: dict) -> None:
    """PA706: one finding for every parameter whose updates rounded away (one cause: the
    updates are below half an ulp of the weights), the parameters listed with their shares,
    the largest first; the plan keeps the norms in float32 when only norms lose them, else
    steps float32 master weights."""
    rule = found.rules.get("PA706")
    if rule is None:
        return
    lost = sorted(((s["update_lost_share"], name, s) for name, s in report["parameters"].items()
                   if (s.get("update_lost_share") or 0) >= rule.params["share"]), key=lambda x: (-x[0], x[1]))
    if not lost:
        return
    types = report.get("module_types", {})
    modules = list(dict.fromkeys(s.get("module", name.rpartition(".")[0]) for _, name, s in lost))
    norms = all("norm" in (types.get(m) or "").lower() for m in modules)
    plan = {"keep_fp32_modules": modules} if norms else dict(MASTER)
    fix_text = (f"keep {', '.join(m or '<root>' for m in modules)} in float32 (plan: keep_fp32_modules), or step "
                "float32 master weights (master_weights: float32)" if norms else
                "step float32 master weights (plan: master_weights: float32)")
    share, first_name, first = lost[0]
    listed = ", ".join(f"{name} {_percent(s)}" for s, name, _ in lost[:NAMED])
    more = f" and {len(lost) - NAMED} more" if len(lost) > NAMED else ""
    values = {"share": share, "share_text": _percent(share), "dtype": first.get("dtype"),
              "parameters": [{"name": name, "share": s} for s, name, _ in lost],
              "parameters_text": f"{len(lost)} parameter{'s' * (len(lost) > 1)} ({listed}{more})",
              "step": first.get("step"), "rank": first.get("rank"), "fix_text": fix_text}
    case = "stalled" if share >= rule.params["stalled"] else "partial"
    found.add("PA706", modules[0] if len(modules) == 1 else "", values, case=case, plan=plan)


# --------------------------------------------------------------------------- PA707 / PA708
def _hidden_losses(found: _Findings, report: dict) -> None:
    integration = report.get("integration") or {}
    if not integration.get("logging_nan_inf_filter"):
        return
    for rank, loss in sorted(report["loss"].items()):
        if loss["nonfinite_count"]:
            found.add("PA707", "", {"count": loss["nonfinite_count"], "rank": int(rank),
                                    "step": loss["nonfinite_steps"][0] if loss["nonfinite_steps"] else None})
            return


def _ranks(found: _Findings, report: dict) -> None:
    """PA708: ranks that disagree at an exchange (losses, headroom) or in the replay."""
    rule = found.rules.get("PA708")
    if rule is None or report["world_size"] < 2:
        return
    first = report.get("first_nonfinite")
    failing = next((t["ranks"] for t in report["triggers"] if t["ranks"]), [])
    if first and 0 < len(failing) < report["world_size"]:
        others = [r for r in range(report["world_size"]) if r not in failing]
        what = (f"rank {first['rank']} diverged at step {first['step']}: its replay turned non-finite in "
                f"{first.get('op')} ({first.get('aten')}) of {_module_text(first.get('module'))}, "
                f"{first['phase']}, while " + (f"ranks {', '.join(map(str, others))} stayed finite on their own batches"
                                               if len(others) > 1 else f"rank {others[0]} stayed finite on its own batch"))
        fix_text = ("the plan keeps the op in float32" if (first.get("region") or {}).get("ops") else
                    f"see PA70{'1' if first['phase'] in ('forward', 'input') else '2'} for the op") + \
            "; look up that rank's batch at that step"
        found.add("PA708", first.get("module") or "", {"what_text": what, "rank": first["rank"], "step": first["step"],
                                                        "fix_text": fix_text}, op=first.get("op"))
        return
    for exchange in report.get("exchanges", []):
        views = [v for v in exchange["ranks"] if v]
        bad = [v["rank"] for v in views if v.get("nonfinite_losses")]
        if 0 < len(bad) < len(views):
            what = (f"rank{'s' * (len(bad) > 1)} {', '.join(map(str, bad))} had inf/NaN losses by step "
                    f"{exchange['step']} while the others' were finite")
            found.add("PA708", "", {"what_text": what, "rank": bad[0], "step": exchange["step"],
                                    "fix_text": "look up that rank's batches since the previous sample"})
            return
        rooms = sorted((number(v.get("headroom")) or 0.0, v["rank"], v.get("headroom_module")) for v in views)
        if len(rooms) > 1 and rooms[-1][0] >= rule.params["floor"] and rooms[-1][0] >= rule.params["ratio"] * rooms[-2][0]:
            what = (f"rank {rooms[-1][1]}'s largest activation ({rooms[-1][2]}) used {rooms[-1][0]:.3g} of its "
                    f"dtype's range at step {exchange['step']}, {rooms[-1][0] / rooms[-2][0]:.0f} times the "
                    "other ranks'")
            found.add("PA708", rooms[-1][2] or "", {"what_text": what, "rank": rooms[-1][1], "step": exchange["step"],
                                                     "fix_text": "look up that rank's batches at that step"})
            return
