"""Rule documentation pages (``precisionaudit rules [ID]``), ruff-style."""


def _severity(rule) -> str:
    return ", ".join(v if k == "default" else f"{v} ({k})" for k, v in rule.severity.items())


def render_catalog(rules) -> str:
    lines = [f"{'id':<6} {'name':<28} {'default':<28} summary"]
    for r in rules:
        lines.append(f"{r.id:<6} {r.name:<28} {_severity(r):<28} {r.summary}")
    return "\n".join(lines) + "\n"


def render_rule(rule) -> str:
    doc = rule.doc
    parts = [f"{rule.id} {rule.name}", "", f"Default severity: {_severity(rule)}"]
    if not rule.needs_inputs:
        parts.append("Runs without example inputs (module structure).")
    if tuple(rule.modes) != ("autocast", "pure"):
        parts.append(f"Applies in mode: {', '.join(rule.modes)}")
    for title, key in (("What it does", "what"), ("Why is this bad?", "why"),
                       ("Example", "bad"), ("Use instead", "good")):
        if doc.get(key):
            parts += ["", f"## {title}", doc[key].rstrip()]
    return "\n".join(parts) + "\n"
