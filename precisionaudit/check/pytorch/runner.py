"""Run the A/B check: reference (fp32), baseline (the target policy), planned (policy + plan).

Exactly one forward per variant (and one backward with ``grad``); the probes, FLOP counter
and gradient hooks ride along on those runs. A variant that raises is a result (status
``error`` with the message); a reference that raises or is non-finite is not: the model or
its inputs are broken and no comparison means anything, so that is a UsageError.
"""
from __future__ import annotations

import contextlib
import copy
import time
from collections import Counter
from dataclasses import dataclass, field

import torch

from ... import __version__
from ...apply.pytorch import LOW, apply_plan, to_low_precision
from ...capture.pytorch import model_file
from ...capture.pytorch.user_code import describe, user_code
from ...core.errors import UsageError
from ...core.target import Target
from ...plan.file import load_plan
from ..metrics import (
    check_reference,
    compare_all,
    named_outputs,
    report_number,
    variant_status,
)
from ..tolerance import tolerance_for
from . import execution
from .divergence import BUDGET_ELEMENTS, Probe
from .flops import GemmFlops
from .grads import (
    ActivationGrads,
    GradHistogram,
    compare_grads,
    loss_scale_report,
    param_grads,
    scalar_loss,
)

GROWTH_ROWS = 200


@dataclass
class Run:
    name: str
    outputs: object = None
    error: str | None = None
    probe: Probe | None = None
    flops: GemmFlops | None = None
    grads: dict | None = None
    wall_s: float = 0.0
    extra: dict = field(default_factory=dict)


def run_check(path: str, target: Target, plan=None, device: str = "auto", tolerance=None,
              seed: int = 0, grad: bool = False, entry: str = "get_model",
              inputs: str = "get_example_inputs") -> dict:
    """The check report (docs/check-report.md) of one model file (a dict, JSON-ready)."""
    with user_code(path, "the model's forward"):  # an exit from the forward is not a verdict
        return _run_check(path, target, plan, device, tolerance, seed, grad, entry, inputs)


def _run_check(path, target, plan, device, tolerance, seed, grad, entry, inputs) -> dict:
    started = time.perf_counter()
    runtime = execution.resolve(device)
    target = Target(target.dtype, target.mode, runtime.policy_device)
    tol = tolerance or tolerance_for(target.dtype)
    warnings = []
    plan_obj = load_plan(plan) if plan is not None else None
    if plan_obj is not None:
        mismatch = plan_obj.target_mismatch(target.as_dict())
        if mismatch:
            warnings.append(mismatch)
    model, args, kwargs = _load(path, entry, inputs, seed, runtime)
    counts = {"forward": 0, "backward": 0}
    # pure variants are converted before the reference runs: a forward may leave state on
    # the model (rotary cos/sin caches as plain attributes) that model.half() never converts
    low_model = _variant_model(model, target, None)
    planned_model = _variant_model(model, target, plan_obj) if plan_obj is not None else None

    # ---- reference
    histogram = GradHistogram() if grad else None
    ref = _execute("reference", model, args, kwargs, seed, tol, counts, reference=None,
                   policy=execution.strict_fp32(), numerics=contextlib.nullcontext(),
                   grad=grad, histogram=histogram)
    if ref.error is not None:
        raise UsageError(f"{path}: the fp32 reference run failed ({ref.error}): the model or its "
                         "example inputs are broken before any low precision")
    ref_outputs = named_outputs(ref.outputs)
    check_reference(path, ref_outputs)
    loss_fn = ref.extra.get("loss_fn")
    scale = 1.0
    gradients = None
    if grad:
        gradients = loss_scale_report(histogram, target.dtype)
        scale = gradients["recommended_init_scale"]
        if "warning" in gradients:
            warnings.append(gradients["warning"])

    # ---- baseline and planned
    variants = [{"name": "reference", "dtype": "float32", "status": "ok", "error": None,
                 "wall_s": report_number(ref.wall_s)}]
    base = _execute("baseline", low_model, *_variant_inputs(args, kwargs, target, runtime.torch_device), seed, tol, counts,
                    reference=ref.probe, policy=execution.policy(runtime, target),
                    numerics=execution.numerics(runtime), grad=grad, loss_fn=loss_fn, scale=scale)
    variants.append(_variant_entry(base, ref_outputs, ref, tol, target))
    del low_model
    if plan_obj is not None:
        handle = apply_plan(planned_model, plan_obj, warn=False, compilable=False)
        try:
            planned = _execute("planned", planned_model, *_variant_inputs(args, kwargs, target, runtime.torch_device), seed,
                               tol, counts, reference=ref.probe,
                               policy=execution.policy(runtime, target),
                               numerics=execution.numerics(runtime), grad=grad, loss_fn=loss_fn,
                               scale=scale)
        finally:
            handle.remove()
        entry_ = _variant_entry(planned, ref_outputs, ref, tol, target)
        entry_["plan"] = {"path": plan_obj.source, "overrides": len(plan_obj.overrides),
                          "gemm_flops_low_precision": entry_["gemm_flops_low_precision"],
                          "unmatched": [o.module for o in handle.unmatched],
                          "unused": [o.module for o in handle.unused_ops()] if planned.error is None else []}
        for o in handle.unmatched:
            warnings.append(f"{plan_obj.source}: override {o.module!r} matches no module of the model")
        variants.append(entry_)
    verdict = variants[-1]["status"] == "ok"
    notes = list(runtime.notes) + _measurement_notes(ref, [base, planned if plan_obj is not None else None])
    if runtime.emulated_ops:
        notes.append("computed in float32 and rounded to the low dtype (no CPU kernel for it; "
                     "CUDA has one): " + ", ".join(sorted(runtime.emulated_ops)))
    report = {"tool": "precisionaudit", "version": __version__, "path": path, "entry": entry,
              "target": target.as_dict(), "device": runtime.name, "tolerance": tol.as_dict(),
              "seed": seed, "executions": counts, "wall_s": report_number(time.perf_counter() - started),
              "variants": variants, "passed": verdict, "warnings": warnings, "notes": notes}
    if gradients is not None:
        report["gradients"] = gradients
    return report


def _measurement_notes(ref, variants) -> list[str]:
    """What the runs could not measure: intermediates past the memory budget, GEMMs whose
    FLOP formula did not apply."""
    notes = []
    skipped = ref.probe.over_budget
    if skipped:
        counted = " and ".join(f"{skipped[k]} {k[:-1]}" for k in ("ops", "modules") if skipped[k])
        notes.append(f"{counted} results past the "
                     f"{BUDGET_ELEMENTS * 4 >> 20} MiB budget for intermediates are not compared with "
                     "the reference: a divergence that starts there shows at the next compared one")
    uncounted = sum((run.flops.uncounted for run in [ref, *variants] if run is not None), Counter())
    if uncounted:
        notes.append("GEMM FLOPs not counted where PyTorch's formula does not apply ("
                     + ", ".join(f"{op} x{n}" for op, n in sorted(uncounted.items()))
                     + "): the low-precision FLOP shares leave them out")
    return notes


# --------------------------------------------------------------------------- loading
def _load(path, entry, inputs, seed, runtime):
    if path.endswith(".onnx"):
        raise UsageError(f"{path}: check runs PyTorch model files; ONNX models are scanned only")
    make_model, make_inputs = model_file.entry_points(path, entry, inputs)
    if make_inputs is None:
        raise UsageError(f"{path}: check needs example inputs: no function {inputs}() "
                         "(use --inputs to name it)")
    torch.manual_seed(seed)
    model = model_file.as_module(model_file.call_user(make_model, path, entry), path, entry)
    if model_file.on_meta(model):
        raise UsageError(f"{path}: the model is on the meta device; check needs real weights")
    torch.manual_seed(seed)
    args, kwargs = model_file.split_inputs(model_file.call_user(make_inputs, path, inputs), path, inputs)
    # the reference is fp32: a model or inputs handed over in fp16/bf16 are widened
    model._apply(lambda t: t.float() if t.dtype in LOW else t)
    model.to(runtime.torch_device).eval()
    args, kwargs = execution.to_device((args, kwargs), runtime.torch_device)
    args, kwargs = _widen((args, kwargs))
    return model, args, kwargs


def _widen(tree):
    from torch.utils import _pytree as pytree
    return pytree.tree_map_only(torch.Tensor, lambda t: t.float() if t.dtype in LOW else t, tree)


def _variant_model(model, target, plan):
    """Autocast variants share the fp32 model; pure variants get a converted copy."""
    if target.mode != "pure":
        return model
    clone = copy.deepcopy(model)
    if plan is not None:
        return to_low_precision(clone, plan, target.torch_dtype)
    return clone.to(target.torch_dtype)


def _variant_inputs(args, kwargs, target, device):
    if target.mode != "pure":
        return args, kwargs
    return execution.to_device((args, kwargs), device, target.torch_dtype)


# --------------------------------------------------------------------------- one execution
def _execute(name, model, args, kwargs, seed, tol, counts, *, reference, policy, numerics, grad,
             loss_fn=None, scale=1.0, histogram=None) -> Run:
    run = Run(name, probe=Probe(model, tol, reference), flops=GemmFlops())
    model.zero_grad(set_to_none=True)
    torch.manual_seed(seed)
    started = time.perf_counter()
    activations = ActivationGrads(histogram) if histogram is not None else contextlib.nullcontext()
    try:
        with numerics:
            with torch.set_grad_enabled(grad), run.probe, activations, policy, run.flops:
                counts["forward"] += 1
                run.outputs = model(*args, **kwargs)
            if grad:
                if loss_fn is None:
                    loss_fn = scalar_loss(run.outputs, seed)
                    run.extra["loss_fn"] = loss_fn
                loss = loss_fn(run.outputs)
                if loss is not None and loss.requires_grad:
                    counts["backward"] += 1
                    (loss * scale).backward()
                    run.grads = param_grads(model, scale)
                    if histogram is not None:
                        for g in run.grads.values():
                            histogram.add(g)
    except Exception as exc:  # noqa: BLE001 - an exception in a variant is its result
        run.error = describe(exc)
    run.wall_s = time.perf_counter() - started
    return run


def _variant_entry(run: Run, ref_outputs, ref: Run, tol, target) -> dict:
    entry = {"name": run.name, "dtype": target.dtype, "mode": target.mode, "status": "error",
             "error": run.error, "outputs": [], "first_divergence": run.probe.first_divergence(),
             # a forward that raised ran part of its GEMMs: no share to report
             "gemm_flops_low_precision": None if run.error else report_number(run.flops.low_share()),
             "error_growth": [{**row, "rel_error": report_number(row["rel_error"])}
                              for row in run.probe.rows[:GROWTH_ROWS]],
             "wall_s": report_number(run.wall_s)}
    if run.error is None:
        entry["outputs"] = compare_all(ref_outputs, run.outputs, tol)
        entry["status"] = variant_status(entry["outputs"])
    if run.grads is not None and ref.grads is not None:
        entry["gradients"] = compare_grads(ref.grads, run.grads)
        if entry["gradients"].get("nonfinite") and entry["status"] == "ok":
            entry["status"] = "nonfinite"
    if entry["status"] == "ok":
        entry["first_divergence"] = None  # intermediate wobbles the outputs absorb are no divergence
    return entry
