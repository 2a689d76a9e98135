"""Human-readable report: grouped by model, most severe first, each with its fix.

Written one model at a time (``render_model``, so that ``scan`` can print each result as
it finishes) and closed by ``render_summary``: the counts, failed models, the findings a
baseline hid, the elapsed time, and the next step when an override plan can fix findings.
"""
import click

from ..core.findings import PLAN_MIN_SEVERITY, PLANNED_ACTIONS, SEVERITIES, SEVERITY_RANK, sort_key, summary
from ..rules.docs import page_url
from .words import plural

SEVERITY_COLORS = {"error": "red", "warning": "yellow", "info": "cyan"}


def _paint(text: str, color: bool, **style) -> str:
    return click.style(text, **style) if color else text


def _link(text: str, url: str | None, color: bool) -> str:
    """An OSC 8 hyperlink (terminals that know it make ``text`` clickable, others show
    ``text``); only where colour is on: a terminal, and there is a page (a rule pack's has none)."""
    return f"\x1b]8;;{url}\x1b\\{text}\x1b]8;;\x1b\\" if color and url else text


def _fix_text(fix: dict) -> str:
    if not fix:
        return ""
    action = fix.get("action", "")
    ops = ", ".join(fix.get("ops", []))
    where = fix.get("module") or "<root>"
    if action == "keep_fp32" and not ops:
        return f"fix: run the whole of {where} in float32 (precisionaudit plan writes the override)"
    if action == "keep_fp32":
        return f"fix: run {ops} in float32 in {where} (precisionaudit plan writes the override)"
    if action == "pad":
        return f"fix: pad to {fix.get('to')}"
    if action == "replace":
        return f"fix: use {fix.get('use')} instead of {ops}"
    if action == "cast_output":
        return "fix: return float32 outputs (.float())"
    if action == "edit":
        return f"fix: {fix.get('to')}"
    if action == "disable_autocast":
        return f"fix: run {ops} inside torch.autocast(..., enabled=False) for the upcast to hold"
    return f"fix: {action}"


def location(f) -> str:
    """``path:line:column`` as far as it is known."""
    if not f.line:
        return f.path
    return f"{f.path}:{f.line}:{f.column}" if f.column else f"{f.path}:{f.line}"


def render_model(result, findings, target, hidden: int = 0, color: bool = False) -> str:
    """One model's block: its header line, notes and findings (``findings`` may hold others');
    ``hidden``: how many of its findings the baseline hid."""
    mine = sorted((f for f in findings if f.path == result.path), key=sort_key)
    judged = result.target or target.as_dict()
    header = _paint(f"{result.path} [{result.entry}] ({judged['dtype']}, {judged['mode']}, "
                    f"{judged['device']})", color, bold=True)
    if result.status != "ok":
        return f"{header}: {_paint('error', color, fg='red', bold=True)}: {result.error}\n"
    read = f"{plural(result.nodes, 'op')} captured" if result.graph is not None else "read, not run"
    lines = [f"{header}: {read} ({result.frontend}), {plural(len(mine), 'finding')}" + (f" ({hidden} hidden by the baseline)" if hidden else "")]
    for note in result.notes + result.skipped:
        lines.append(f"  note: {note}")
    for f in mine:
        severity = _paint(f.severity, color, fg=SEVERITY_COLORS[f.severity], bold=True)
        lines.append(f"  {_paint(location(f), color, bold=True)}: {_link(_paint(f.rule, color, fg='red'), page_url(f.rule), color)} "
                     f"[{severity}] {f.name}")
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
    return "\n".join(lines) + "\n"


def plannable(findings) -> list:
    """Findings that ``precisionaudit plan`` (default --min-severity) turns into overrides."""
    threshold = SEVERITY_RANK[PLAN_MIN_SEVERITY]
    return [f for f in findings if SEVERITY_RANK[f.severity] <= threshold
            and (f.fix or {}).get("action") in PLANNED_ACTIONS]


def render_summary(results, findings, target, elapsed: float | None = None, hidden: int = 0,
                   baseline: str | None = None, color: bool = False) -> str:
    """The closing lines: counts, failed models, hidden findings, time, and the next step."""
    counts = summary(findings)
    failed = sum(r.status == "error" for r in results)
    line = "found " + ", ".join(plural(counts[s], s) for s in SEVERITIES)
    line += f" in {plural(len(results), 'model')}"
    if elapsed is not None:
        line += f" ({elapsed:.1f} s)"
    if failed:
        line += f"; {plural(failed, 'model')} failed"
    if hidden:
        line += f"; {plural(hidden, 'finding')} hidden by the baseline" + (f" {baseline}" if baseline else "")
    lines = [_paint(line, color, bold=True)]
    hints = {r.path: r.plan_hint for r in results}  # each file's frontend wrote its plan command
    by_path: dict[str, int] = {}
    for f in plannable(findings):
        by_path[f.path] = by_path.get(f.path, 0) + 1
    for path, count in by_path.items():
        if hints.get(path) is None:  # a file no plan applies to (a training script)
            continue
        lines.append(f"{_paint('hint', color, fg='green', bold=True)}: an override plan fixes "
                     f"{plural(count, 'finding')} of {path}: {hints[path]}")
    return "\n".join(lines) + "\n"


def render(report, color: bool = False) -> str:
    """The whole report (a ``core.report.ScanReport``) at once."""
    return "".join(render_model(r, report.findings, report.target, color=color) for r in report.results) + \
        render_summary(report.results, report.findings, report.target, hidden=len(report.hidden),
                       baseline=report.baseline_shown, color=color)


def render_statistics(counts, color: bool = False) -> str:
    """``--statistics``: how many findings each rule has, most first (``rule_counts``), as ruff."""
    width = max([len(str(c["count"])) for c in counts] + [1])
    return "".join(f"{c['count']:>{width}}  {_paint(c['rule'], color, fg='red')}  {c['name']}\n"
                   for c in counts)
