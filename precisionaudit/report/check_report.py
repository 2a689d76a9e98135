"""The check report (``precisionaudit check``): JSON as docs/check-report.md defines it, and text.

Reporters only format the report dict the check built; they compute nothing.
"""
from __future__ import annotations

import math

from ..core import strict_json
from ..core.target import FP4_FORMATS
from .words import verdict

TEXT_GROWTH_ROWS = 24


def render_json(report: dict) -> str:
    return strict_json.dumps(report)  # never NaN/Infinity tokens, which strict parsers refuse


def _e(x, digits=2) -> str:
    if x is None:
        return "-"
    if x == 0:
        return "0"
    return f"{x:.{digits}e}"


def _pct(x) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def _pow2(x) -> str:
    k = math.log2(x) if x and x > 0 else None
    return f"2^{int(k)}" if k is not None and k == int(k) else f"{x:g}"


def tolerance_text(tol: dict, kind: str = "FP8") -> str:
    """'atol 0.01, rtol 0.01 (of max |reference|), cosine 0.999' and what FP8 (FP4) adds."""
    parts = []
    if tol.get("atol") is not None or tol.get("rtol") is not None:
        parts.append(f"atol {tol.get('atol') or 0:g}, rtol {tol.get('rtol') or 0:g} (of max |reference|)")
    parts.append(f"cosine {tol['cosine']:g}")
    if tol.get("snr_db") is not None:
        parts.append(f"SNR {tol['snr_db']:g} dB")
    if tol.get("gemm_snr_db") is not None:
        parts.append(f"each {kind} GEMM's SNR {tol['gemm_snr_db']:g} dB")
    return ", ".join(parts)


def render_text(report: dict) -> str:
    t = report["target"]
    tol = report["tolerance"]
    runs = report["executions"]
    dtype = f"float8 {t['recipe']}" if t.get("recipe") else t["dtype"]
    lines = [f"{report['path']} [{report['entry']}] ({dtype}, {t['mode']}, {t['device']}) "
             f"on {report['device']}",
             f"tolerance: {tolerance_text(tol, 'FP4' if t['dtype'] in FP4_FORMATS else 'FP8')}; "
             f"{runs['forward']} forward and {runs['backward']} backward "
             f"runs in {report['wall_s']:.2f} s"]
    lines += [f"warning: {w}" for w in report.get("warnings", [])]
    lines += [f"note: {n}" for n in report.get("notes", [])]
    lines.append("")
    width = max([6] + [len(o["name"]) for v in report["variants"] for o in v.get("outputs", [])])
    lines.append(f"  {'variant':10} {'output':{width}} {'status':18} {'max_abs':>9} {'max_rel':>9} "
                 f"{'mean_rel':>9} {'cosine':>9} {'snr_db':>7} {'nonfinite':>9} {'top1':>6}")
    for v in report["variants"]:
        lines.extend(_variant_lines(v, width))
    growth = _growth(report["variants"])
    if growth:
        lines.append("")
        lines.extend(growth)
    if "gradients" in report:
        lines.append("")
        lines.extend(_gradient_lines(report))
    last = report["variants"][-1]
    lines.append("")
    lines.append("passed" if report["passed"] else verdict(False, last["name"], last["status"]))
    return "\n".join(lines) + "\n"


def _variant_lines(v, width: int) -> list[str]:
    name = v["name"]
    if name == "reference":
        return [f"  {name:10} {'':{width}} ok (float32)"]
    out = []
    extra = f"GEMM FLOPs low: {_pct(v.get('gemm_flops_low_precision'))}"
    if v.get("linear_modules_low_precision"):
        linears = v["linear_modules_low_precision"]
        extra += f"; Linear modules low: {linears['low']} of {linears['total']}"
    if v.get("nodes_low_precision") is not None:  # ONNX: share of the graph's nodes converted
        extra += f"; nodes low: {_pct(v['nodes_low_precision'])}"
    for kind in ("fp8", "fp4"):
        if kind in v:
            extra += "; " + _quantized_text(v, kind)
    if "plan" in v:
        plan = v["plan"]
        extra += f"; plan {plan['path']}: {plan['overrides']} override{'s' * (plan['overrides'] != 1)}"
    if v["status"] == "error":
        out.append(f"  {name:10} {'':{width}} error: {v['error']}")
    for o in v["outputs"]:
        if "max_abs" not in o:
            out.append(f"  {name:10} {o['name']:{width}} {o['status']:18} {o.get('reason', '')}")
            continue
        snr = "inf" if o["snr_db"] is None else f"{o['snr_db']:.1f}"
        cosine = "-" if o["cosine"] is None else f"{o['cosine']:.6f}"
        out.append(f"  {name:10} {o['name']:{width}} {o['status']:18} {_e(o['max_abs']):>9} "
                   f"{_e(o['max_rel']):>9} {_e(o['mean_rel']):>9} {cosine:>9} {snr:>7} "
                   f"{o['nonfinite']:>9} {_pct(o.get('top1_agreement')):>6}")
    out.append(f"  {'':10} {extra}")
    fd = v.get("first_divergence")
    if fd:
        where = fd["module"] + (f" · {fd['op']}" if fd.get("op") else "")
        where += f" [{fd['node']}]" if fd.get("node") else ""  # ONNX: the graph node
        at = f" ({fd['line']})" if fd.get("line") else ""
        what = {"error": "raised", "nonfinite": f"{fd.get('nonfinite')} non-finite values",
                "exceeds_tolerance": f"relative error {_e(fd.get('rel_error'))}"}[fd["kind"]]
        if fd.get("snr_db") is not None:  # an FP8/FP4 GEMM below its own SNR bar
            what = f"its {'FP4' if 'fp4' in v else 'FP8'} GEMM's SNR {fd['snr_db']:.1f} dB"
        out.append(f"  {'':10} first divergence: {where}{at}: {what}")
    if v.get("plan", {}).get("unused"):
        out.append(f"  {'':10} plan entries whose ops never ran: {', '.join(v['plan']['unused'])}")
    return out


def _quantized_text(v, kind: str) -> str:
    """'FP8 (tensorwise): 3 Linears, 75.0% of GEMM FLOPs; kept out: head; 1 fallback' (FP4:
    'FP4 (nvfp4): ...')."""
    facts = v[kind]
    text = (f"{kind.upper()} ({facts.get('recipe') or facts.get('format')}): {facts['linears']} "
            f"Linear{'s' * (facts['linears'] != 1)}, {_pct(v.get(f'gemm_flops_{kind}'))} of GEMM FLOPs")
    if facts["kept_out"]:
        text += f"; kept out: {', '.join(facts['kept_out'])}"
    if facts["fallback"]:
        text += f"; {len(facts['fallback'])} not eligible"
    worst = facts.get("worst_gemm")
    if worst:
        snr = "inf" if worst["snr_db"] is None else f"{worst['snr_db']:.1f}"
        text += f"; lowest GEMM SNR {snr} dB ({worst['module']})"
    return text


def _growth(variants) -> list[str]:
    shown = [v for v in variants if v.get("error_growth")]
    if not shown:
        return []
    order, table = [], {}
    for v in shown:
        for row in v["error_growth"]:
            if row["module"] not in table:
                order.append(row["module"])
                table[row["module"]] = {}
            table[row["module"]][v["name"]] = row
    keep = set(order[:TEXT_GROWTH_ROWS])
    keep |= {v["first_divergence"]["module"] for v in shown if v.get("first_divergence")}
    rows = [m for m in order if m in keep]
    width = max(len(m) for m in rows) if rows else 6
    lines = ["error growth (max |error| / max |reference| of each module's output, in order):",
             f"  {'module':{width}} " + " ".join(f"{v['name']:>14}" for v in shown)]
    for m in rows:
        cells = []
        for v in shown:
            row = table[m].get(v["name"])
            if row is None:
                cells.append(f"{'-':>14}")
            elif row["nonfinite"]:
                cells.append(f"{'nonfinite ' + str(row['nonfinite']):>14}")
            else:
                cells.append(f"{_e(row['rel_error']):>14}")
        lines.append(f"  {m:{width}} " + " ".join(cells))
    if len(order) > len(rows):
        lines.append(f"  ... {len(order) - len(rows)} more modules (--format json lists them)")
    return lines


def _gradient_lines(report) -> list[str]:
    g = report["gradients"]
    scale = g["recommended_init_scale"]
    lines = [f"gradients (low-precision backward at loss scale {_pow2(scale)}, unscaled in fp32):"]
    for v in report["variants"]:
        grads = v.get("gradients")
        if not grads or not grads.get("parameters"):
            continue
        cosine = "-" if grads["cosine"] is None else f"{grads['cosine']:.6f}"
        lines.append(f"  {v['name']:10} rel_l2 {_e(grads['rel_l2'])}  cosine {cosine}  "
                     f"nonfinite {grads['nonfinite']}  worst {grads['worst_parameter']} "
                     f"({_e(grads['worst_rel_l2'])})")
    under = g["underflow_fp16"]
    lines.append(f"fp16 underflow of the fp32 reference gradients ({g['values']} values, "
                 f"max |g| {_e(g['max_abs'])}; flushed to 0 below 2^-24, subnormal below 2^-14):")
    fp16_scale = 2.0 ** round(math.log2(scale)) if report["target"]["dtype"] == "float16" else None
    rows = [("1", under["scale_1"]), (f"{_pow2(g['gradscaler_default'])} (GradScaler default)",
                                       under["gradscaler_default"])]
    if fp16_scale is not None:
        rows.append((f"{_pow2(fp16_scale)} (recommended)", under["recommended"]))
    for label, u in rows:
        lines.append(f"  loss scale {label:28} flushed {_pct(u['zero']):>7}  subnormal {_pct(u['subnormal']):>7}")
    if "note" in g:
        lines.append(f"  {g['note']}")
    else:
        verdict = "overflows (GradScaler will skip steps and back off)" if g["overflow_at_default"] \
            else "keeps the largest gradient finite"
        lines.append(f"recommended initial loss scale: {_pow2(scale)} = {scale:g}; "
                     f"GradScaler's default {_pow2(g['gradscaler_default'])} {verdict}")
    return lines
