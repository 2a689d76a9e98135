"""``precisionaudit watch DIR``: the report of a watch log as text, JSON (docs/watch.md) or HTML.

Formats what the log's reader and the PA7xx findings say; computes nothing.
"""
from __future__ import annotations

from .. import __version__
from ..core.findings import SEVERITIES, sort_key, summary
from ..watch.log import FORMAT_VERSION
from ..core.strict_json import dumps
from .words import plural


def watch_document(report: dict, findings: list, path: str) -> dict:
    """The JSON document: the log's report, its findings (the scan's schema, with the step
    and rank they come from) and their counts."""
    findings = sorted(findings, key=sort_key)
    rows = [{**f.to_json(), "step": f.evidence.get("step"), "rank": f.evidence.get("rank")} for f in findings]
    return {"tool": "precisionaudit", "version": __version__, "watch_version": FORMAT_VERSION, "log_dir": path,
            **report, "findings": rows, "summary": summary(findings)}


def render_json(document: dict) -> str:
    return dumps(document)


def render_text(document: dict) -> str:
    d = document
    run = d["run"]
    lines = [f"precisionaudit watch {d['log_dir']}: {plural(d['steps'], 'step')}, world size {d['world_size']}"
             + ("" if d["complete"] else " (the job ended before close(): the log stops at its last event)"),
             f"run: {run.get('dtype') or 'float32'} {run.get('mode')}"
             f"{_stored(run)} on {run.get('device')}, {run.get('model')}"
             f"{' in ' + run['wrapper'] if run.get('wrapper') else ''}, {run.get('optimizer')}"
             + (f", {d['scaler']['kind']}" if d.get("scaler") else "")]
    first = d.get("first_nonfinite")
    if first:
        lines.append(f"first non-finite: step {first['step']}, rank {first['rank']}, {first['phase']}: "
                     f"{first.get('aten') or 'the gradient reaching the outputs'}"
                     + (f" ({first['node']})" if first.get("node") else "")
                     + f" of {first.get('op')} in {_module(first.get('module'))}, {first.get('dtype')}; float32 from "
                     f"the same inputs: {_fp32(first.get('fp32_finite'))}")
        region = first.get("region") or {}
        if region.get("ops"):
            origin = region.get("origin")
            lines.append(f"  region: {', '.join(region['ops'])} in {_module(region['module'])}"
                         + (f" (where {origin['op']} in {_module(origin['module'])} {origin['lost']})" if origin else ""))
    elif d["triggers"]:
        lines.append("first non-finite: none found by the replay")
    scaler = d.get("scaler")
    if scaler:
        lines.append(f"scaler: {plural(scaler['skipped_steps'], 'skipped step')}, longest streak "
                     f"{scaler['longest_skip_streak']}, final scale {_g(scaler.get('final_scale'))}")
    lines.append("")
    for f in d["findings"]:
        where = ("the run" if f.get("step") is None else f"step {f['step']}"
                 + (f", rank {f['rank']}" if f.get("rank") is not None else ""))
        lines.append(f"{f['rule']} [{f['severity']}] {f['name']} {_module(f['module'])} ({where})")
        lines.append(f"  {f['message']}")
        if f["fix"].get("to"):
            lines.append(f"  fix: {f['fix']['to']}")
    counts = d["summary"]
    lines.append(("" if not d["findings"] else "\n") + ", ".join(plural(counts[s], s) for s in SEVERITIES))
    if any(f["fix"].get("plan") for f in d["findings"]):
        lines.append(f"plan: precisionaudit plan {d['log_dir']} -o amp_plan.yaml")
    return "\n".join(lines).replace("\n\n\n", "\n\n") + "\n"


def _module(name) -> str:
    return "the loss outside the model" if name is None else (name or "<root>")


def _fp32(value) -> str:
    return {True: "finite", False: "not finite"}.get(value, "not rerun")


def _g(value) -> str:
    return "-" if value is None else f"{value:g}"


def _stored(run: dict) -> str:
    """' (parameters stored in float32)' where the run computes in another dtype (FSDP's
    MixedPrecisionPolicy, DeepSpeed's bf16)."""
    stored = run.get("storage_dtype")
    return f" (parameters stored in {stored})" if stored and stored != (run.get("dtype") or "float32") else ""
