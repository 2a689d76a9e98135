"""The HTML page of ``check --train --html FILE``: what the text report says, and three plots.

- the loss curves of every variant (fp32 reference, baseline, planned) against the step;
- the dynamic loss scale each GradScaler run used at each step, its skipped steps marked
  (fp16 autocast; a page without a scaled run says so instead);
- each per-module measure a finding is about (updates lost, optimizer state underflow,
  gradients flushed: the finding's ``evidence.measure``), one bar per module per
  low-precision variant; a page without such a finding says so instead of drawing zeros.

The variants, the modules' measures and the findings are plain HTML tables too, readable
with JavaScript off. Formats what the check measured (docs/check-report.md); computes
nothing. The page is assembled by report.html (plotly inlined, nothing loaded).
"""
from __future__ import annotations

from .html import _e, _num, _page, _rule_link, require_plotly
from .words import verdict

SKIPPED_COLOR = "#d62728"
#: per-module measure (``modules[]`` key) → (div id, heading, axis title, hover words)
MODULE_MEASURES = {
    "updates_lost": ("updates-lost", "Updates lost per module", "updates lost (share of element-steps)",
                     "of updates lost"),
    "state_underflow": ("state-underflow", "Optimizer state underflow per module",
                        "exp_avg_sq 0 or subnormal where fp32's is normal (worst step)", "of exp_avg_sq underflowed"),
    "grad_flushed": ("grad-flushed", "Gradients flushed per module",
                     "gradient elements 0 where fp32's are not (worst step)", "of gradients flushed"),
}


def render_train(report: dict) -> str:
    """The page of a ``check --train`` report dict (``TrainReport.to_dict()``)."""
    t = report["target"]
    last = report["variants"][-1]
    outcome = "passed" if report["passed"] else "failed"
    body = ["<h1>precisionaudit check --train</h1>",
            f"<p>{_e(report['path'])}: {report['steps']} training steps, lr {report['lr']:g} "
            f"({_e(t['dtype'])}, {_e(t['mode'])}, {_e(t['device'])}) on {_e(report['device'])}; "
            f"seed {_e(report['seed'])}</p>",
            f'<p id="verdict" class="verdict-{outcome}">{_e(verdict(report["passed"], last["name"], last["status"]))}'
            "</p>"]
    body += [f'<p class="note">warning: {_e(w)}</p>' for w in report.get("warnings", [])]
    body += [f'<p class="note">note: {_e(n)}</p>' for n in report.get("notes", [])]
    body += [_variants_table(report["variants"]), "<h2>Findings</h2>", _findings_table(report["findings"])]
    figures = [("loss", loss_curves(report["variants"]))]
    body.append('<h2>Loss per step</h2><div id="loss" class="plot"></div>')
    scale = loss_scale_trajectory(report["variants"])
    if scale is not None:
        body.append('<h2>Loss scale per step (skipped steps marked)</h2><div id="loss-scale" class="plot"></div>')
        figures.append(("loss-scale", scale))
    else:
        body.append('<p class="note" id="no-loss-scale">No variant scales its loss (no GradScaler).</p>')
    charted = charted_measures(report)
    for measure in charted:
        figure = per_module(report["variants"], measure)
        if figure is not None:
            div, heading = MODULE_MEASURES[measure][:2]
            body.append(f'<h2>{heading}</h2><div id="{div}" class="plot"></div>')
            figures.append((div, figure))
    if not charted:
        body.append('<p class="note" id="no-module-measures">No finding is about a per-module measure: '
                    "the table below lists every module's.</p>")
    body.append(_modules_table(report["variants"]))
    return _page(f"precisionaudit check --train {report['path']}", body, figures)


def _label(variant: dict) -> str:
    return f"{variant['name']} ({variant['dtype']})"


def _low_variants(variants: list) -> list:
    return [v for v in variants if v["name"] != "reference"]


# --------------------------------------------------------------------------- the plots
def loss_curves(variants: list):
    """Each variant's loss at each step (a gap where it was inf/NaN or the run stopped)."""
    go, _ = require_plotly()
    figure = go.Figure()
    for v in variants:
        losses = v.get("loss") or []
        figure.add_trace(go.Scatter(x=list(range(len(losses))), y=losses, mode="lines+markers",
                                    name=_label(v), meta=v["name"],
                                    hovertemplate="step %{x}: loss %{y:.6g}<extra>" + _label(v) + "</extra>"))
    figure.update_xaxes(title="optimizer step")
    figure.update_yaxes(title="loss")
    figure.update_layout(height=420, margin={"t": 20})
    return figure


def loss_scale_trajectory(variants: list):
    """The scale each scaled run's backward used per step (log axis), its skipped steps as
    markers; None when no run scales its loss."""
    scaled = [v for v in _low_variants(variants) if (v.get("loss_scale") or {}).get("trajectory")]
    if not scaled:
        return None
    go, _ = require_plotly()
    figure = go.Figure()
    for v in scaled:
        trajectory, skipped = v["loss_scale"]["trajectory"], v["loss_scale"].get("skipped_steps") or []
        figure.add_trace(go.Scatter(x=list(range(len(trajectory))), y=trajectory, mode="lines+markers",
                                    name=f"{_label(v)} loss scale", meta=v["name"],
                                    hovertemplate="step %{x}: scale %{y:g}<extra></extra>"))
        figure.add_trace(go.Scatter(x=skipped, y=[trajectory[i] for i in skipped], mode="markers",
                                    name=f"{_label(v)} skipped steps", meta=f"{v['name']}:skipped",
                                    marker={"symbol": "x", "size": 11, "color": SKIPPED_COLOR},
                                    hovertemplate="step %{x} skipped (inf/NaN gradients)<extra></extra>"))
    figure.update_xaxes(title="optimizer step")
    figure.update_yaxes(type="log", title="loss scale", exponentformat="power")
    figure.update_layout(height=380, margin={"t": 20})
    return figure


def charted_measures(report: dict) -> list[str]:
    """The per-module measures the findings of any variant are about, in MODULE_MEASURES' order."""
    findings = [*report.get("findings", []), *(f for v in report["variants"] for f in v.get("findings", []))]
    named = {(f.get("evidence") or {}).get("measure") for f in findings}
    return [m for m in MODULE_MEASURES if m in named]


def per_module(variants: list, measure: str):
    """One per-module ``measure`` (a share), one bar per module per low-precision variant
    (None when no variant has module measures, e.g. every run raised at once)."""
    drawn = [v for v in _low_variants(variants) if v.get("modules")]
    if not drawn:
        return None
    go, _ = require_plotly()
    _, _, axis, words = MODULE_MEASURES[measure]
    figure = go.Figure()
    for v in drawn:
        modules = v["modules"]
        figure.add_trace(go.Bar(x=[m["module"] or "<root>" for m in modules],
                                y=[m.get(measure) for m in modules], name=_label(v), meta=v["name"],
                                hovertemplate="%{x}: %{y:.1%} " + words + "<extra>" + _label(v) + "</extra>"))
    figure.update_yaxes(title=axis, range=[0, 1], tickformat=".0%")
    figure.update_layout(height=420, margin={"t": 20}, barmode="group")
    return figure


# --------------------------------------------------------------------------- the tables
def _variants_table(variants: list) -> str:
    rows = ['<table id="train-variants"><thead><tr><th>variant</th><th>dtype</th><th>status</th>'
            "<th>first loss</th><th>last loss</th><th>drift</th><th>loss gap</th><th>skipped steps</th>"
            "</tr></thead><tbody>"]
    for v in variants:
        losses = v.get("loss") or []
        skipped = (v.get("loss_scale") or {}).get("skipped_steps")
        rows.append(
            f'<tr data-variant="{_e(v["name"])}" data-status="{_e(v["status"])}"><td>{_e(v["name"])}</td>'
            f'<td>{_e(v["dtype"])}</td><td>{_e(v["status"])}{": " + _e(v["error"]) if v.get("error") else ""}</td>'
            f'<td class="num">{_num(losses[0] if losses else None, "{:.6g}")}</td>'
            f'<td class="num">{_num(losses[-1] if losses else None, "{:.6g}")}</td>'
            f'<td class="num">{_num(v.get("drift"))}</td><td class="num">{_num(v.get("loss_gap"))}</td>'
            f'<td class="num">{"-" if skipped is None else len(skipped)}</td></tr>')
    rows.append("</tbody></table>")
    return "".join(rows)


def _modules_table(variants: list) -> str:
    rows = ['<h2>Modules</h2><table id="train-modules"><thead><tr><th>variant</th><th>module</th>'
            "<th>type</th><th>updates lost</th><th>never moved</th><th>optimizer state underflow</th>"
            "<th>gradients flushed</th><th>drift</th></tr></thead><tbody>"]
    for v in _low_variants(variants):
        for m in v.get("modules") or []:
            rows.append(
                f'<tr data-variant="{_e(v["name"])}" data-module="{_e(m["module"])}"><td>{_e(v["name"])}</td>'
                f'<td>{_e(m["module"] or "<root>")}</td><td>{_e(m.get("type"))}</td>'
                + "".join(f'<td class="num">{_pct(m.get(k))}</td>'
                          for k in ("updates_lost", "never_moved", "state_underflow", "grad_flushed"))
                + f'<td class="num">{_num(m.get("drift"))}</td></tr>')
    rows.append("</tbody></table>")
    return "".join(rows)


def _findings_table(findings: list) -> str:
    if not findings:
        return '<p id="no-findings">No findings.</p>'
    rows = ['<table id="findings"><thead><tr><th>severity</th><th>rule</th><th>module</th>'
            "<th>message</th></tr></thead><tbody>"]
    for f in findings:
        rows.append(f'<tr data-severity="{_e(f["severity"])}" data-rule="{_e(f["rule"])}">'
                    f'<td class="sev-{_e(f["severity"])}">{_e(f["severity"])}</td>'
                    f'<td>{_rule_link(f["rule"])} {_e(f.get("name"))}</td>'
                    f'<td>{_e(f.get("module") or "<root>")}</td><td>{_e(f["message"])}</td></tr>')
    rows.append("</tbody></table>")
    return "".join(rows)


def _pct(x) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"
