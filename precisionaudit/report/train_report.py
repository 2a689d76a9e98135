"""The text of ``check --train``'s report (the JSON is the report dict itself,
docs/check-report.md). Formats what the check measured; computes nothing."""
from __future__ import annotations

from .words import verdict

#: modules listed under a variant: the worst by updates lost, state underflow or flushed gradients
MODULE_ROWS = 8


def render_train_text(report: dict) -> str:
    t = report["target"]
    lines = [f"{report['path']}: {report['steps']} training steps, lr {report['lr']:g} "
             f"({t['dtype']}, {t['mode']}, {t['device']}) on {report['device']}"]
    lines += [f"warning: {w}" for w in report.get("warnings", [])]
    lines += [f"note: {n}" for n in report.get("notes", [])]
    lines.append("")
    for variant in report["variants"]:
        lines.extend(_variant_lines(variant))
    if report["findings"]:
        lines.append("")
        lines += [f"{f['path']}: {f['rule']} [{f['severity']}] {f['module'] or '<root>'}: {f['message']}"
                  for f in report["findings"]]
    last = report["variants"][-1]
    lines += ["", verdict(report["passed"], last["name"], last["status"])
              + ("" if report["passed"] else " (precisionaudit plan --train writes the fix)")]
    return "\n".join(lines) + "\n"


def _variant_lines(v: dict) -> list[str]:
    losses = [x for x in v.get("loss", []) if x is not None]
    curve = f"loss {losses[0]:.4g} -> {losses[-1]:.4g}" if losses else "no finite loss"
    extra = "".join(f", {k.replace('_', ' ')} {v[k]:.3g}" for k in ("drift", "loss_gap") if v.get(k) is not None)
    lines = [f"  {v['name']:10} {v['status']:9} {curve}{extra}"]
    if v.get("error"):
        lines.append(f"      error: {v['error']}")
    if v.get("first_nonfinite"):
        lines.append(f"      first inf/NaN: {v['first_nonfinite']}")
    scale = v.get("loss_scale")
    if scale and scale.get("trajectory"):
        lines.append(f"      loss scale {scale['trajectory'][0]:g} -> {scale['trajectory'][-1]:g}, "
                     f"{len(scale.get('skipped_steps', []))} step(s) skipped")
    worst = sorted(v.get("modules", []), key=_badness, reverse=True)[:MODULE_ROWS]
    for m in worst:
        if _badness(m) > 0:
            lines.append(f"      {m['module'] or '<root>'}: updates lost {_pct(m.get('updates_lost'))}, "
                         f"optimizer state underflow {_pct(m.get('state_underflow'))}, "
                         f"gradients flushed {_pct(m.get('grad_flushed'))}")
    return lines


def _badness(module: dict) -> float:
    return max(module.get(k) or 0.0 for k in ("updates_lost", "state_underflow", "grad_flushed"))


def _pct(x) -> str:
    return "-" if x is None else f"{100 * x:.0f}%"
