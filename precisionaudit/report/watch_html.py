"""The HTML page of ``precisionaudit watch DIR --format html``: what the text report says, and
two plots.

- the timeline of rank 0: the loss per step, the loss scale where it was read (log axis),
  the skipped steps and the triggers marked;
- per module and sampled step (every rank's samples), a heat map of the headroom left in
  bits (log2 of the dtype's largest value over the module's largest output: 0 is an
  overflow; readable in bfloat16, whose range is 2^128, as in float16) and one of the
  gradient underflow share;
- per parameter and sampled step, a heat map of the share of its updates that rounded away.

The findings are a plain HTML table too, readable with JavaScript off. Formats the log's
report; computes nothing. The page is assembled by report.html (plotly inlined).
"""
from __future__ import annotations

import math

from ..core.findings import Finding
from .html import _e, _findings_table, _page, require_plotly

SKIPPED_COLOR, TRIGGER_COLOR = "#d62728", "#9467bd"


def render_watch(document: dict, timeline: dict, samples: list) -> str:
    first = document.get("first_nonfinite")
    body = ["<h1>precisionaudit watch</h1>",
            f'<p id="summary">{_e(document["log_dir"])}: {document["steps"]} steps, world size '
            f'{document["world_size"]}{"" if document["complete"] else " (the job ended before close())"}</p>']
    if first:
        body.append(f'<p id="first-nonfinite" class="sev-error">first non-finite: step {first["step"]}, rank '
                    f'{first["rank"]}, {_e(first["phase"])}: {_e(first.get("aten"))} of {_e(first.get("op"))} in '
                    f'{_e(first.get("module") or "<root>")} ({_e(first.get("dtype"))})</p>')
    findings = [Finding(**{k: v for k, v in f.items() if k not in ("step", "rank")}) for f in document["findings"]]
    body += ["<h2>Findings</h2>", _findings_table(findings),
             '<h2>Timeline (rank 0): loss, loss scale, skipped steps, triggers</h2><div id="timeline" class="plot">'
             "</div>"]
    figures = [("timeline", timeline_figure(timeline))]
    for key, field, title in (
            ("headroom", "modules", "Headroom left per module, in bits (log2 of the dtype's largest value over the "
                                    "module's largest output; 0: it overflowed)"),
            ("grad_underflow_share", "modules", "Gradient underflow share per module (float16, at the scale in use)"),
            ("update_lost_share", "parameters", "Share of each parameter's updates that rounded away")):
        figure = heat_map(samples, key, field)
        if figure is not None:
            body.append(f'<h2>{_e(title)}</h2><div id="heat-{key}" class="plot"></div>')
            figures.append((f"heat-{key}", figure))
    return _page(f"precisionaudit watch {document['log_dir']}", body, figures)


def _finite_or_none(values):
    return [v if isinstance(v, (int, float)) and math.isfinite(v) else None for v in values]


def timeline_figure(timeline: dict):
    """Loss (left axis) and loss scale (right, log) against the step; skips and triggers marked."""
    go, _ = require_plotly()
    figure = go.Figure()
    figure.add_trace(go.Scatter(x=timeline["loss_steps"], y=_finite_or_none(timeline["loss"]), mode="lines",
                                name="loss", meta="loss", hovertemplate="step %{x}: loss %{y:.6g}<extra></extra>"))
    bad = [s for s, v in zip(timeline["loss_steps"], timeline["loss"])
           if not (isinstance(v, (int, float)) and math.isfinite(v))]
    if bad:
        figure.add_trace(go.Scatter(x=bad, y=[0] * len(bad), mode="markers", name="inf/NaN loss", meta="nonfinite",
                                    marker={"symbol": "triangle-up", "color": SKIPPED_COLOR}))
    if timeline["scale"]:
        figure.add_trace(go.Scatter(x=timeline["scale_steps"], y=timeline["scale"], mode="lines+markers",
                                    name="loss scale", meta="scale", yaxis="y2", line={"shape": "hv"},
                                    hovertemplate="step %{x}: scale %{y:g}<extra></extra>"))
    for step in timeline["skipped"]:
        figure.add_vline(x=step, line={"color": SKIPPED_COLOR, "width": 1, "dash": "dot"})
    for trigger in timeline["triggers"]:
        figure.add_vline(x=trigger["step"], line={"color": TRIGGER_COLOR, "width": 2},
                         annotation_text=trigger["why"], annotation_position="top")
    figure.update_layout(height=420, margin={"t": 30}, xaxis={"title": "optimizer step"},
                         yaxis={"title": "loss"},
                         yaxis2={"title": "loss scale", "type": "log", "overlaying": "y", "side": "right",
                                 "exponentformat": "power"})
    return figure


def heat_map(samples: list, key: str, field: str = "modules"):
    """Modules (or parameters: ``field``) as rows by sampled step (columns, ``rank:step`` when
    several ranks logged); None when no sample measured ``key``. Shares run from 0 to 1;
    ``headroom`` is drawn in bits left, fewest (an overflow: 0) reddest."""
    columns = [s for s in samples if any(key in m for m in s.get(field, {}).values())]
    if not columns:
        return None
    go, _ = require_plotly()
    rows = list(dict.fromkeys(name for s in columns for name, m in s[field].items() if key in m))
    several = len({s["rank"] for s in columns}) > 1
    labels = [f"{s['rank']}:{s['step']}" if several else str(s["step"]) for s in columns]
    bits = key == "headroom"
    cell = _bits if bits else _share
    z = [[cell(s[field].get(name, {}).get(key)) for s in columns] for name in rows]
    finite = [v for row in z for v in row if v is not None]
    scale = {"colorscale": "Reds_r", "zmin": 0, "zmax": max(finite + [1.0]),
             "colorbar": {"title": "bits"}} if bits else {"colorscale": "Reds", "zmin": 0, "zmax": 1}
    figure = go.Figure(go.Heatmap(z=z, x=labels, y=[m or "<root>" for m in rows], meta=key, **scale,
                                  hovertemplate="%{y} at %{x}: %{z:.3g}<extra></extra>"))
    figure.update_layout(height=max(300, 18 * len(rows) + 120), margin={"t": 20},
                         xaxis={"title": "sampled step" + (" (rank:step)" if several else ""), "type": "category"})
    return figure


def _number(value):
    return float(value) if isinstance(value, str) else value


def _share(value):
    """A share for the heat map: inf/NaN (an overflowed output) drawn as 1, the top."""
    value = _number(value)
    if value is None:
        return None
    return 1.0 if not math.isfinite(value) else min(1.0, value)


def _bits(share):
    """Bits of headroom left from the share of the dtype's largest value used: log2(1 / share);
    0 for an overflow (inf/NaN, or a share of 1 and above); None for an output that was 0."""
    share = _number(share)
    if share is None or share == 0:
        return None
    return 0.0 if not math.isfinite(share) or share >= 1 else -math.log2(share)
