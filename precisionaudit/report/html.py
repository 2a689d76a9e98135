"""The HTML report (``scan --format html``, ``check --html FILE``): one self-contained file.

Plotly draws the module treemap and the plots; its JavaScript is inlined once, so the file
opens offline and loads nothing from anywhere. The findings and the variants are plain
HTML tables, readable (and searchable) with JavaScript off.
"""
from __future__ import annotations

import html
import math

from ..core.errors import UsageError
from ..core.findings import SEVERITIES, SEVERITY_RANK, sort_key, summary
from ..core.numerics import FP16_MAX, LARGEST_FINITE, SMALLEST_NORMAL
from ..rules.docs import page_url
from .check_report import tolerance_text
from .text import location
from .words import plural

SEVERITY_COLORS = {"error": "#d62728", "warning": "#ff7f0e", "info": "#1f77b4"}
TINTS = {"error": "#f4b6b6", "warning": "#fbd7b0", "info": "#bcd3ec"}
PLAIN = "#e8e8e8"
FP16_ZERO_BELOW, FP16_SUBNORMAL_BELOW = -24, -14  # binary exponents

STYLE = """
body{font-family:system-ui,sans-serif;margin:1.5rem;color:#222}
table{border-collapse:collapse;margin:.5rem 0 1.5rem}
th,td{border:1px solid #ccc;padding:.25rem .5rem;text-align:left;vertical-align:top}
th{background:#f3f3f3} td.num{text-align:right;font-variant-numeric:tabular-nums}
.sev-error{color:#d62728;font-weight:bold}.sev-warning{color:#c25e00;font-weight:bold}
.sev-info{color:#1f77b4}.verdict-passed{color:#2a7d2a}.verdict-failed{color:#d62728}
.note{color:#555}
"""


def require_plotly():
    try:
        import plotly.graph_objects as go
        from plotly.offline import get_plotlyjs
    except ImportError as exc:
        raise UsageError("the HTML report needs plotly: pip install 'precisionaudit[html]'") from exc
    return go, get_plotlyjs


def _e(value) -> str:
    return html.escape("" if value is None else str(value))


def _script_json(figure) -> str:
    """The figure as JSON safe inside a script element ("</script>" in a message would end it)."""
    return figure.to_json().replace("</", "<\\/")


def _page(title: str, body: list[str], figures: list[tuple[str, object]]) -> str:
    """The document: ``body`` (HTML parts, with ``<div id=...>`` placeholders for the
    figures) and each figure drawn into its div by the inlined plotly.js."""
    _, get_plotlyjs = require_plotly()
    scripts = [f"(function (f) {{ Plotly.newPlot({div_id!r}, f.data, f.layout, "
               f"{{displaylogo: false, responsive: true}}); }})({_script_json(fig)});"
               for div_id, fig in figures]
    return "\n".join([
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{_e(title)}</title><style>{STYLE}</style>",
        f'<script type="text/javascript">{get_plotlyjs()}</script>', "</head><body>",
        *body, "<script>", *scripts, "</script>", "</body></html>", ""])


# --------------------------------------------------------------------------- scan
def render_scan(scan) -> str:
    """The page of a ``core.report.ScanReport``."""
    results, findings, target = scan.results, scan.findings, scan.target
    counts = summary(findings)
    body = ["<h1>precisionaudit scan</h1>",
            f'<p id="summary">{_e(", ".join(plural(counts[s], s) for s in SEVERITIES))} in '
            f"{_e(plural(len(results), 'model'))} (target: {_e(target.named_dtype)}, {_e(target.mode)}, "
            f"{_e(target.device)})</p>",
            "<h2>Findings</h2>", _findings_table(sorted(findings, key=sort_key))]
    figures = []
    for index, result in enumerate(results):
        judged = result.target or target.as_dict()
        body.append(f'<section class="model" data-path="{_e(result.path)}">')
        body.append(f"<h2>{_e(result.path)} [{_e(result.entry)}] ({_e(judged['dtype'])}, "
                    f"{_e(judged['mode'])}, {_e(judged['device'])})</h2>")
        if result.status == "error":
            body.append(f'<p class="sev-error">error: {_e(result.error)}</p></section>')
            continue
        body += [f'<p class="note">note: {_e(n)}</p>' for n in [*result.notes, *result.skipped]]
        mine = [f for f in findings if f.path == result.path]
        if result.graph is not None and result.graph.number_of_nodes():
            body.append(f'<h3>Modules ({plural(result.graph.number_of_nodes(), "op")}; flagged ops '
                        f'in the colour of their worst finding)</h3><div id="tree-{index}" class="tree"></div>')
            figures.append((f"tree-{index}", module_tree(result.graph, mine, result.path)))
            ranges = measured_ranges(result.graph, judged["dtype"])
            if ranges is not None:
                body.append(f'<h3>Measured ranges against {_e(judged["dtype"])}</h3>'
                            f'<div id="ranges-{index}" class="ranges"></div>')
                figures.append((f"ranges-{index}", ranges))
        body.append("</section>")
    return _page("precisionaudit scan", body, figures)


def _rule_link(rule_id: str) -> str:
    """The rule id, linked to its page where it has one (a rule pack's rule has none)."""
    url = page_url(rule_id)
    return f'<a href="{_e(url)}">{_e(rule_id)}</a>' if url else _e(rule_id)


def _findings_table(findings) -> str:
    if not findings:
        return '<p id="no-findings">No findings.</p>'
    rows = ['<table id="findings"><thead><tr><th>severity</th><th>rule</th><th>location</th>'
            "<th>module</th><th>op</th><th>node</th><th>message</th></tr></thead><tbody>"]
    for f in findings:
        rows.append(
            f'<tr data-severity="{_e(f.severity)}" data-rule="{_e(f.rule)}" data-node="{_e(f.node)}">'
            f'<td class="sev-{_e(f.severity)}">{_e(f.severity)}</td>'
            f'<td>{_rule_link(f.rule)} {_e(f.name)}</td>'
            f"<td>{_e(location(f))}</td><td>{_e(f.module or '<root>')}</td><td>{_e(f.op)}</td>"
            f"<td>{_e(f.node)}</td><td>{_e(f.message)}</td></tr>")
    rows.append("</tbody></table>")
    return "".join(rows)


def module_tree(graph, findings, path: str):
    """A plotly treemap of the module hierarchy: each module's area is its op count, each
    flagged op a tile of its own in the colour of its worst finding."""
    go, _ = require_plotly()
    by_node: dict[str, list] = {}
    for f in findings:
        if f.node is not None:
            by_node.setdefault(f.node, []).append(f)
    tiles: dict[str, dict] = {"": {"label": path, "parent": "", "value": 0, "worst": None, "hover": ""}}

    def module_id(module: str) -> str:
        if module not in tiles:
            parent = module.rsplit(".", 1)[0] if "." in module else ""
            module_id(parent)
            tiles[module] = {"label": module.rsplit(".", 1)[-1], "parent": parent, "value": 0,
                             "worst": None, "hover": module}
        return module

    for name, attrs in graph.nodes(data=True):
        module = module_id(attrs.get("module") or "")
        flagged = by_node.get(name)
        if not flagged:
            tiles[module]["value"] += 1
            continue
        worst = min((f.severity for f in flagged), key=SEVERITY_RANK.__getitem__)
        tiles[f"{module}::{name}"] = {
            "label": f"{attrs.get('op')} ({name})", "parent": module, "value": 1, "worst": worst,
            "hover": "<br>".join(f"{f.rule} {f.severity}: {f.message}" for f in flagged), "op": True}
        ancestor = module
        while True:  # tint the modules above it
            current = tiles[ancestor]["worst"]
            if current is None or SEVERITY_RANK[worst] < SEVERITY_RANK[current]:
                tiles[ancestor]["worst"] = worst
            if ancestor == "":
                break
            ancestor = tiles[ancestor]["parent"]
    ids = list(tiles)
    colors = [(SEVERITY_COLORS if t.get("op") else TINTS).get(t["worst"], PLAIN) for t in tiles.values()]
    figure = go.Figure(go.Treemap(
        ids=[f"m:{i}" for i in ids], labels=[tiles[i]["label"] for i in ids],
        parents=["" if i == "" else f"m:{tiles[i]['parent']}" for i in ids],
        values=[tiles[i]["value"] for i in ids], branchvalues="remainder",
        marker={"colors": colors}, hovertext=[tiles[i]["hover"] or tiles[i]["label"] for i in ids],
        hoverinfo="text", maxdepth=4))
    figure.update_layout(margin={"t": 10, "l": 10, "r": 10, "b": 10}, height=480)
    return figure


def measured_ranges(graph, dtype: str):
    """Each op's measured |value| range (value-aware scans) against the dtype's range, or
    None when nothing was measured."""
    # the fp32 reference's where it was recorded (batches near the range), else the run under the target's
    rows = [(name, c.stats or c.target) for name, attrs in graph.nodes(data=True) if (c := attrs.get("calibration"))]
    rows = [(n, m) for n, m in rows if m and m.get("max_abs")]
    if not rows:
        return None
    go, _ = require_plotly()
    largest, tiny = LARGEST_FINITE[dtype], SMALLEST_NORMAL[dtype]
    figure = go.Figure()
    figure.add_trace(go.Scatter(
        x=[n for n, _ in rows], y=[m["max_abs"] for _, m in rows], mode="markers", name="max |value|"))
    low = [(n, m["min_nonzero"]) for n, m in rows if m.get("min_nonzero")]
    if low:
        figure.add_trace(go.Scatter(x=[n for n, _ in low], y=[v for _, v in low], mode="markers",
                                    name="min |nonzero value|"))
    for value, dash, color, text in ((largest, "dash", "#d62728", f"{dtype} max {largest:g}"),
                                     (tiny, "dot", "#1f77b4", f"{dtype} min normal {tiny:g}")):
        figure.add_hline(y=value, line_dash=dash, line_color=color)
        # an annotation on a log axis is placed in log10 units, a shape in data units (plotly.py
        # #2580): add_hline's own annotation_text would sit at 10**value, off the chart
        figure.add_annotation(text=text, y=math.log10(value), yref="y", x=1, xref="x domain",
                              xanchor="right", yanchor="bottom", showarrow=False)
    figure.update_yaxes(type="log", title="|value|")
    figure.update_layout(height=420, margin={"t": 20})
    return figure


# --------------------------------------------------------------------------- check
def render_check(report: dict) -> str:
    t, tol = report["target"], report["tolerance"]
    verdict = "passed" if report["passed"] else "FAILED"
    body = ["<h1>precisionaudit check</h1>",
            f"<p>{_e(report['path'])} [{_e(report['entry'])}] ({_e(t['dtype'])}, {_e(t['mode'])}, "
            f"{_e(t['device'])}) on {_e(report['device'])}; tolerance {_e(tolerance_text(tol))}</p>",
            f'<p id="verdict" class="verdict-{verdict.lower()}">{verdict}</p>']
    body += [f'<p class="note">warning: {_e(w)}</p>' for w in report.get("warnings", [])]
    body += [f'<p class="note">note: {_e(n)}</p>' for n in report.get("notes", [])]
    body.append(_variants_table(report["variants"]))
    figures = []
    growth = error_growth(report["variants"])
    if growth is not None:
        body.append('<h2>Error growth per module</h2><div id="growth" class="plot"></div>')
        figures.append(("growth", growth))
    if report.get("gradients", {}).get("histogram", {}).get("count"):
        body.append('<h2>Gradient magnitudes against the float16 range</h2>'
                    '<div id="gradients" class="plot"></div>')
        figures.append(("gradients", gradient_histogram(report["gradients"])))
    return _page(f"precisionaudit check {report['path']}", body, figures)


def _num(x, fmt="{:.3g}") -> str:
    return "-" if x is None else fmt.format(x)


def _variants_table(variants) -> str:
    rows = ['<table id="variants"><thead><tr><th>variant</th><th>output</th><th>status</th>'
            "<th>max_abs</th><th>max_rel</th><th>cosine</th><th>snr_db</th><th>nonfinite</th>"
            "<th>first divergence</th></tr></thead><tbody>"]
    for v in variants:
        fd = v.get("first_divergence") or {}
        where = " · ".join(x for x in (fd.get("module"), fd.get("op") or fd.get("node")) if x)
        outputs = v.get("outputs") or [{"name": "", "status": v["status"]}]
        for o in outputs:
            rows.append(
                f'<tr data-variant="{_e(v["name"])}" data-status="{_e(o.get("status"))}">'
                f'<td>{_e(v["name"])}</td><td>{_e(o.get("name"))}</td>'
                f'<td>{_e(o.get("status"))}{": " + _e(v["error"]) if v.get("error") else ""}</td>'
                f'<td class="num">{_num(o.get("max_abs"))}</td><td class="num">{_num(o.get("max_rel"))}</td>'
                f'<td class="num">{_num(o.get("cosine"), "{:.6f}")}</td>'
                f'<td class="num">{_num(o.get("snr_db"), "{:.1f}")}</td>'
                f'<td class="num">{_e(o.get("nonfinite", ""))}</td><td>{_e(where)}</td></tr>')
    rows.append("</tbody></table>")
    return "".join(rows)


def error_growth(variants):
    """Each variant's relative error per module, in execution order (log scale), or None."""
    drawn = [v for v in variants if v.get("error_growth")]
    if not drawn:
        return None
    go, _ = require_plotly()
    figure = go.Figure()
    for v in drawn:
        rows = v["error_growth"]
        figure.add_trace(go.Scatter(
            x=list(range(1, len(rows) + 1)),
            y=[r["rel_error"] if r["rel_error"] is not None and r["rel_error"] > 0 else None for r in rows],
            mode="lines+markers", name=v["name"], text=[r["module"] for r in rows],
            hovertemplate="%{text}<br>relative error %{y:.3g}<extra>" + v["name"] + "</extra>"))
    figure.update_xaxes(title="module call, in execution order")
    figure.update_yaxes(type="log", title="relative error vs fp32", exponentformat="power")
    figure.update_layout(height=420, margin={"t": 20})
    return figure


def gradient_histogram(gradients: dict):
    """The fp32 reference gradients by binary exponent, with the bands that float16 flushes
    to zero or holds as subnormals at loss scale 1, and the overflow above 65504."""
    go, _ = require_plotly()
    hist = gradients["histogram"]
    figure = go.Figure(go.Bar(x=hist["log2"], y=hist["count"], name="gradient values",
                              hovertemplate="2^%{x} <= |g| < 2^(%{x}+1): %{y}<extra></extra>"))
    lo = min(hist["log2"] + [FP16_ZERO_BELOW]) - 1
    hi = max(hist["log2"] + [16]) + 1
    figure.add_vrect(x0=lo, x1=FP16_ZERO_BELOW - 0.5, fillcolor="#d62728", opacity=0.12, line_width=0,
                     annotation_text="zero in fp16", annotation_position="top left")
    figure.add_vrect(x0=FP16_ZERO_BELOW - 0.5, x1=FP16_SUBNORMAL_BELOW - 0.5, fillcolor="#ff7f0e",
                     opacity=0.12, line_width=0, annotation_text="subnormal", annotation_position="top left")
    figure.add_vrect(x0=math.log2(FP16_MAX) - 0.5, x1=hi, fillcolor="#d62728", opacity=0.12, line_width=0,
                     annotation_text="overflow", annotation_position="top left")
    figure.update_xaxes(title="binary exponent of |gradient| (loss scale 1)", range=[lo, hi])
    figure.update_yaxes(title="values", type="log")
    figure.update_layout(height=420, margin={"t": 30}, bargap=0.05)
    return figure
