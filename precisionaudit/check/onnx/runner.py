"""The check (docs/check-report.md) of an ONNX model: fp32 vs converted vs converted + plan.

Three onnxruntime (CPU) runs on the same generated inputs: the model as it is
(``reference``), converted to float16 (``baseline``) and converted with the plan's nodes
kept in float32 (``planned``). The converted variants are the models ``precisionaudit
convert --keep-io-types`` writes (float32 inputs and outputs, so that outputs compare
with the reference), run through the float16 emulation of ``onnx_emulate``. Each run
also returns the nodes' intermediate results (up to a memory budget), so the first node
that leaves the reference is known without another run. Metrics, tolerances and the
report are the PyTorch check's; a conversion that fails is the variant's ``error``.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
import onnx

from ... import __version__
from ...apply.onnx import BF16_UNSUPPORTED, convert, resolve_plan
from ...core.errors import UsageError
from ...core.text import first_few
from ...plan.file import load_plan
from ...runtime.onnx.emulate import NOTE, emulate
from ...runtime.onnx.graph import canonical_op, module_of, name_nodes, refuse_converted, source_of, tensor_info
from ...runtime.onnx.inputs import make_inputs, resolve_shapes
from ...runtime.onnx.io import infer_shapes, session, verify, with_outputs
from ...runtime.onnx.load import load_onnx
from ..metrics import (
    BUDGET_ELEMENTS,
    check_reference,
    compare_all,
    divergence,
    report_number,
    variant_status,
)
from ..tolerance import tolerance_for

DEVICE = "onnxruntime-cpu"
GEMM_OPS = {"MatMul", "Gemm", "Conv"}  # the nodes whose FLOPs the shares count
GROWTH_ROWS = 200


@dataclass
class Reference:
    """A model, its generated inputs and its fp32 run: what every variant is compared with."""

    path: str
    model: onnx.ModelProto
    feeds: dict
    inputs: dict  # how each input was generated
    watched: list  # (node, output index, tensor) compared node by node
    values: dict  # (node, output index) → the reference's result
    outputs: list  # [(output name, numpy array)]
    flops: dict  # GEMM node → FLOPs
    wall_s: float
    counts: dict = field(default_factory=lambda: {"forward": 0, "backward": 0})
    notes: list = field(default_factory=list)  # what the reference could not measure


def run_reference(path: str, input_shapes: dict | None = None, seed: int = 0, model=None,
                  feeds: dict | None = None) -> Reference:
    """Load ``path`` (unless ``model`` is given), generate its inputs (unless ``feeds``, a
    calibration batch, are given), run it in fp32 once."""
    model = model if model is not None else load_onnx(path)
    name_nodes(model.graph)
    if feeds is None:
        shapes = resolve_shapes(model, input_shapes or {}, path)
        feeds, described = make_inputs(model, shapes, seed, path)
    else:
        shapes = {name: tuple(value.shape) for name, value in feeds.items()}
        described = {name: {"shape": list(value.shape), "dtype": str(value.dtype), "values": "--data"}
                     for name, value in feeds.items()}
    typed = _typed(model, shapes)
    watched, unwatched = _watch(model, typed)
    flops = _gemm_flops(model, typed)
    uncounted = [n.name for n in model.graph.node if n.op_type in GEMM_OPS and n.name not in flops]
    counts = {"forward": 0, "backward": 0}
    values, wall, error = _run(with_outputs(model, [t for _, _, t in watched]), feeds, counts)
    if error is not None:
        raise UsageError(f"{path}: the fp32 reference run failed ({error}): the model or the "
                         "generated inputs are broken before any low precision (--input-shape?)")
    outputs = [(o.name, np.asarray(values[o.name])) for o in model.graph.output]
    check_reference(path, outputs)
    notes = [unwatched] if unwatched else []
    if uncounted:
        notes.append(f"GEMM FLOPs of {len(uncounted)} {'/'.join(sorted(GEMM_OPS))} node(s) not counted, "
                     f"their shapes unknown ({first_few(uncounted)}): the low-precision FLOP shares leave them out")
    return Reference(path, model, feeds, described, watched,
                     {(node, i): values[t] for node, i, t in watched}, outputs, flops, wall, counts, notes)


def run_onnx_check(path: str, plan=None, dtype: str = "float16", tolerance=None, seed: int = 0,
                   input_shapes: dict | None = None, device: str = "cuda", values=None) -> dict:
    """The check report (a dict, JSON-ready) for one ONNX model file. With calibration data
    (``values.data``: .npz batches) every batch is checked; the report is the first failing
    batch's (else the last one's), with ``batch`` and ``data`` saying which."""
    started = time.perf_counter()
    if dtype != "float16":
        raise UsageError(BF16_UNSUPPORTED)
    tol = tolerance or tolerance_for(dtype)
    model = load_onnx(path)
    refuse_converted(model, path, "check needs the float32 model (the file convert read) to run "
                     "as its reference")
    name_nodes(model.graph)
    plan_obj = load_plan(plan) if plan is not None else None
    if plan_obj is not None:
        resolve_plan(plan_obj, model.graph, dtype)  # a plan for another model stops here
    if values is None or values.data is None:
        return _check_inputs(path, model, plan_obj, dtype, tol, seed, input_shapes, device, None, started)
    from ...runtime.data import onnx_batches
    from ...runtime.onnx.inputs import graph_inputs

    report = None
    names = [i.name for i in graph_inputs(model)]
    for index, feeds in enumerate(onnx_batches(values.data, names, values.batches)):
        report = _check_inputs(path, model, plan_obj, dtype, tol, seed, input_shapes, device, feeds, started)
        report.update(batch=index, data=values.data)
        if not report["passed"]:
            break
    return report


def _check_inputs(path, model, plan_obj, dtype, tol, seed, input_shapes, device, feeds, started) -> dict:
    ref = run_reference(path, input_shapes, seed, model, feeds)
    variants = [{"name": "reference", "dtype": "float32", "status": "ok", "error": None,
                 "wall_s": report_number(ref.wall_s)}]
    warnings = []
    for name, chosen in (("baseline", None), ("planned", plan_obj)):
        if name == "planned" and chosen is None:
            break
        entry, conversion, _ = run_variant(ref, name, chosen, tol)
        if conversion is not None:
            if name == "baseline":
                warnings += [c.message() for c in conversion.clipped]
            warnings += conversion.warnings
        variants.append(entry)
    return {"tool": "precisionaudit", "version": __version__, "path": path, "entry": "onnx",
            "target": {"dtype": dtype, "mode": "pure", "device": device}, "device": DEVICE,
            "tolerance": tol.as_dict(), "seed": seed, "inputs": ref.inputs, "executions": ref.counts,
            "wall_s": report_number(time.perf_counter() - started), "variants": variants,
            "passed": variants[-1]["status"] == "ok", "warnings": warnings, "notes": [NOTE, *ref.notes]}


# --------------------------------------------------------------------------- variants
def run_variant(ref: Reference, name: str, plan, tol):
    """(the variant's report entry, the Conversion or None, (node, output) → divergence kind
    or None) of the model converted with ``plan`` (None: the baseline), in one run."""
    entry = {"name": name, "dtype": "float16", "mode": "pure", "status": "error", "error": None,
             "outputs": [], "first_divergence": None, "gemm_flops_low_precision": None,
             "linear_modules_low_precision": None, "nodes_low_precision": None, "error_growth": [], "wall_s": None}
    try:
        conversion = convert(ref.model, plan, "float16", keep_io_types=True, source=ref.path)
        verify(conversion.model, f"{ref.path} converted to float16")
    except UsageError as exc:
        entry["error"] = str(exc)
        return entry, None, {}
    kept = set(conversion.kept)
    entry["nodes_low_precision"] = report_number(conversion.low_share)
    entry["gemm_flops_low_precision"] = _low_share(ref.flops, kept)
    linears = _linear_nodes(ref.model)
    if linears:  # an nn.Linear's export: a MatMul or Gemm by a 2-D weight initializer
        entry["linear_modules_low_precision"] = {"low": len(set(linears) - kept), "total": len(linears)}
    if plan is not None:
        entry["plan"] = {"path": plan.source, "overrides": len(plan.overrides),
                         "nodes": len(conversion.by_plan),
                         "gemm_flops_low_precision": entry["gemm_flops_low_precision"],
                         "unmatched": [], "unused": []}
    emulated, visible = emulate(conversion.model)
    names = {(node, i): visible[node][i] for node, i, _ in ref.watched if node in visible}
    values, wall, error = _run(with_outputs(emulated, list(names.values())), ref.feeds, ref.counts)
    entry["wall_s"] = report_number(wall)
    if error is not None:
        entry["error"] = error
        return entry, conversion, {}
    got = {o.name: np.asarray(values[o.name]) for o in ref.model.graph.output}
    entry["outputs"] = compare_all(ref.outputs, got, tol)
    entry["status"] = variant_status(entry["outputs"])
    rows, first, kinds = _divergence(ref.model, ref.watched, ref.values,
                                     {k: values[v] for k, v in names.items()}, tol)
    entry["error_growth"] = rows[:GROWTH_ROWS]
    if entry["status"] != "ok":
        entry["first_divergence"] = first
    return entry, conversion, kinds


def _run(model, feeds, counts):
    """(name → array, wall seconds, error message or None) of one onnxruntime run."""
    try:
        sess = session(model)
    except Exception as exc:  # noqa: BLE001 - a variant that does not load is its result
        return {}, 0.0, f"onnxruntime could not load it: {str(exc).splitlines()[0]}"
    started = time.perf_counter()
    counts["forward"] += 1
    try:
        outputs = sess.run(None, feeds)
    except Exception as exc:  # noqa: BLE001
        return {}, time.perf_counter() - started, f"onnxruntime failed: {str(exc).splitlines()[0]}"
    wall = time.perf_counter() - started
    return {o.name: v for o, v in zip(sess.get_outputs(), outputs)}, wall, None


# --------------------------------------------------------------------------- intermediates
def _typed(model, shapes):
    """The model with the concrete input shapes and the shapes inference derives from them."""
    fixed = onnx.ModelProto()
    fixed.CopyFrom(model)
    for vi in fixed.graph.input:
        if vi.name in shapes:
            del vi.type.tensor_type.shape.dim[:]
            for size in shapes[vi.name]:
                vi.type.tensor_type.shape.dim.add().dim_value = size
    del fixed.graph.value_info[:]
    infer_shapes(fixed)
    return fixed


def _watch(model, typed) -> tuple[list[tuple[str, int, str]], str | None]:
    """((node, output index, tensor) of float results to compare, in graph order, within the
    memory budget; the report's note on float results left out, or None)."""
    info = tensor_info(typed)
    watched, used = [], 0
    unshaped, over_budget = [], []
    for node in model.graph.node:
        if node.op_type == "Constant":
            continue
        for i, name in enumerate(node.output):
            elem, dims = info.get(name, (None, None))
            if not name or elem not in (None, 0, onnx.TensorProto.FLOAT):
                continue  # not a float result: nothing to compare
            if not elem or dims is None or None in dims:
                unshaped.append(node.name)
                continue
            size = int(np.prod(dims)) if dims else 1
            if over_budget or used + size > BUDGET_ELEMENTS:
                over_budget.append(node.name)
                continue
            used += size
            watched.append((node.name, i, name))
    return watched, _unwatched_note(unshaped, over_budget)


def _unwatched_note(unshaped: list, over_budget: list) -> str | None:
    reasons = [f"{len(names)} without a known type or shape ({first_few(names)})" for names in [unshaped] if names]
    reasons += [f"{len(names)} past the {BUDGET_ELEMENTS * 4 >> 20} MiB budget for intermediates "
                f"(from {names[0]} on)" for names in [over_budget] if names]
    if not reasons:
        return None
    return ("node results not compared with the reference: " + "; ".join(reasons)
            + ": a divergence that starts there shows at the next compared node")


def _divergence(model, watched, reference, got, tol):
    """(error growth rows per module, first diverging node or None, (node, output) → kind)."""
    nodes = {n.name: n for n in model.graph.node}
    last: dict[str, dict] = {}
    first = {"nonfinite": None, "exceeds_tolerance": None}
    kinds = {}
    for node_name, i, _ in watched:
        if (node_name, i) not in got:
            continue
        measured = divergence([_float64(reference[(node_name, i)])], [_float64(got[(node_name, i)])], tol)
        if measured is None:
            continue
        rel, bad, kind = measured
        node = nodes[node_name]
        module = module_of(node) or "<root>"
        last.pop(module, None)
        last[module] = {"module": module, "rel_error": report_number(rel), "nonfinite": bad}
        kinds[(node_name, i)] = kind
        if kind and first[kind] is None:
            file, line = source_of(node)
            first[kind] = {"module": module, "op": canonical_op(node),
                           "node": node_name, "line": f"{file}:{line}" if file else None,
                           "rel_error": report_number(rel), "nonfinite": bad, "kind": kind}
    return list(last.values()), first["nonfinite"] or first["exceeds_tolerance"], kinds


def _float64(values) -> np.ndarray:
    return np.asarray(values, dtype=np.float64)


# --------------------------------------------------------------------------- GEMM FLOPs
def _gemm_flops(model, typed) -> dict[str, int]:
    """Node → FLOPs of the MatMul / Gemm / Conv nodes whose shapes are known."""
    info = tensor_info(typed)
    weights = {i.name: list(i.dims) for i in model.graph.initializer}

    def dims(name):
        return weights.get(name) or (info.get(name, (None, None))[1])

    flops = {}
    for node in model.graph.node:
        out = dims(node.output[0]) if node.output else None
        if not out or None in out:
            continue
        if node.op_type in ("MatMul", "Gemm"):
            a = dims(node.input[0])
            if not a or a[-1] is None:
                continue
            trans_a = any(at.name == "transA" and at.i for at in node.attribute)
            k = a[0] if node.op_type == "Gemm" and trans_a else a[-1]
            flops[node.name] = 2 * int(np.prod(out)) * int(k)
        elif node.op_type == "Conv":
            w = dims(node.input[1])
            if w and None not in w:
                flops[node.name] = 2 * int(np.prod(out)) * int(np.prod(w[1:]))
    return flops


def _linear_nodes(model) -> list[str]:
    """The MatMul / Gemm nodes that multiply by a 2-D weight initializer (an exported Linear)."""
    weights = {i.name for i in model.graph.initializer if len(i.dims) == 2}
    return [n.name for n in model.graph.node if n.op_type in ("MatMul", "Gemm") and any(i in weights for i in n.input)]


def _low_share(flops: dict, kept: set):
    total = sum(flops.values())
    if not total:
        return None
    return report_number(sum(v for n, v in flops.items() if n not in kept) / total)
