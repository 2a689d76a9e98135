"""Human-readable report: grouped by model, most severe first, each with its fix."""
from ..core.findings import SEVERITIES, sort_key, summary


def _fix_text(fix: dict) -> str:
    if not fix:
        return ""
    action = fix.get("action", "")
    ops = ", ".join(fix.get("ops", []))
    where = fix.get("module") or "<root>"
    if action == "keep_fp32":
        return f"fix: run {ops or 'it'} in float32 in {where} (precisionaudit plan writes the override)"
    if action == "pad":
        return f"fix: pad to {fix.get('to')}"
    if action == "replace":
        return f"fix: use {fix.get('use')} instead of {ops}"
    if action == "cast_output":
        return "fix: return float32 outputs (.float())"
    if action == "disable_autocast":
        return f"fix: run {ops} inside torch.autocast(..., enabled=False) for the upcast to hold"
    return f"fix: {action}"


def render(results, findings, target) -> str:
    lines = []
    for result in results:
        mine = sorted((f for f in findings if f.path == result.path), key=sort_key)
        judged = result.target or target.as_dict()
        header = f"{result.path} [{result.entry}] ({judged['dtype']}, {judged['mode']}, {judged['device']})"
        if result.status != "ok":
            lines.append(f"{header}: error: {result.error}")
            continue
        lines.append(f"{header}: {result.nodes} ops captured ({result.frontend}), "
                     f"{len(mine)} finding{'s' * (len(mine) != 1)}")
        for note in result.notes + result.skipped:
            lines.append(f"  note: {note}")
        for f in mine:
            where = f"{f.path}:{f.line}" if f.line else f.path
            lines.append(f"  {where}: {f.rule} [{f.severity}] {f.name}")
            node = f" ({f.node})" if f.node and f.node != f.op else ""  # masked_fill_1, not masked_fill
            place = (f.module or "<root>") + (f" · {f.op}{node}" if f.op else "") + ": "
            if not (f.module or f.op):  # e.g. an unused suppression comment: no graph place
                place = ""
            lines.append(f"      {place}{f.message}")
            if "source" in f.evidence:
                lines.append(f"      at {f.evidence['source']}")
            fix = _fix_text(f.fix)
            if fix:
                lines.append(f"      {fix}")
    counts = summary(findings)
    lines.append("found " + ", ".join(f"{counts[s]} {s}" for s in SEVERITIES))
    return "\n".join(lines) + "\n"
