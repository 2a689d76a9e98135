"""``precisionaudit check`` for a Keras model: float32, the model's own dtype policies, and
those policies with the plan's layers in float32, on the example inputs.

One model, three runs: the reference gives every layer a float32 policy (under mixed
policies the variables are float32 already, so the weights are the same), the baseline
runs the policies the model was built with, the planned run adds the plan
(``apply.keras``). Keras takes its CUDA dtype paths (``--device cuda``) and the
low-precision GEMMs and convolutions compute as CUDA's do, in fp32 arithmetic rounded once
(runtime.pytorch.emulation), on CPU tensors.
"""
from __future__ import annotations

import time

from .. import __version__
from ..apply.keras import apply_keras_plan
from ..core.errors import UsageError
from ..plan.file import load_plan
from .metrics import check_reference, compare_all, report_number, variant_status
from .tolerance import tolerance_for


def run_check(path: str, target, plan=None, tolerance=None, seed: int = 0, load=None) -> dict:
    """The check report (docs/check-report.md) of one Keras model file or archive."""
    import contextlib

    import torch

    from ..capture.keras.backend import import_keras
    from ..capture.keras.capture import keras_device, layer_paths, model_and_inputs, policy_target, layer_facts
    from ..runtime.pytorch.emulation import EmulatedKernels
    from ..runtime.pytorch.execution import named_outputs
    from ..runtime.sources import DEFAULT_LOAD

    started = time.perf_counter()
    keras = import_keras()
    keras.utils.set_random_seed(seed)
    load = load or DEFAULT_LOAD
    model, example = model_and_inputs(keras, path, load)
    judged = policy_target(layer_facts(model), target)
    tol = tolerance or tolerance_for(judged.dtype)
    plan_obj = load_plan(plan) if plan is not None else None
    layers = [layer for _, layer in layer_paths(model).values()]
    if any(layer.dtype_policy.variable_dtype in ("float16", "bfloat16") for layer in layers):
        raise UsageError(f"{path}: check compares against float32 with the same weights; layers whose "
                         "policy keeps float16/bfloat16 variables (policy float16) have no such reference")
    args = example if isinstance(example, (tuple, list)) else (example,)
    emulated = judged.device == "cuda"
    counts = {"forward": 0, "backward": 0}

    def forward(name):
        kernels = EmulatedKernels(refuse_scalars=False) if emulated and name != "reference" else contextlib.nullcontext()
        begun = time.perf_counter()
        try:
            with torch.no_grad(), keras_device(judged.device), kernels:
                counts["forward"] += 1
                return named_outputs(model(*args, training=False)), None, time.perf_counter() - begun
        except Exception as exc:  # noqa: BLE001 - a variant that raises is that variant's result
            return None, f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}", \
                time.perf_counter() - begun

    policies = {id(layer): layer.dtype_policy for layer in layers}
    for layer in layers:
        layer.dtype_policy = "float32"
    ref_outputs, error, ref_wall = forward("reference")
    for layer in layers:
        layer.dtype_policy = policies[id(layer)]
    if error is not None:
        raise UsageError(f"{path}: the fp32 reference run failed ({error}): the model or its example inputs "
                         "are broken before any low precision")
    ref_outputs = [(n, v.float() if hasattr(v, "float") else v) for n, v in ref_outputs]
    check_reference(path, ref_outputs)
    variants = [{"name": "reference", "dtype": "float32", "status": "ok", "error": None,
                 "wall_s": report_number(ref_wall)}]
    variants.append(_entry("baseline", forward("baseline"), ref_outputs, tol, judged))
    warnings = []
    if plan_obj is not None:
        with apply_keras_plan(model, plan_obj) as handle:
            entry_ = _entry("planned", forward("planned"), ref_outputs, tol, judged)
            entry_["plan"] = {"path": plan_obj.source, "overrides": len(plan_obj.overrides),
                              "gemm_flops_low_precision": None, "layers": sorted(handle.layers),
                              "unmatched": [o.module for o in handle.unmatched], "unused": []}
            warnings += [f"{plan_obj.source}: override {o.module!r} matches no layer of the model"
                         for o in handle.unmatched]
        variants.append(entry_)
    notes = ["Keras model: the reference gives every layer a float32 policy; the planned run gives the plan's "
             "layers one (a whole layer: an entry's ops are not narrowed)"]
    if emulated:
        notes.append("Keras's torch backend on its CUDA dtype paths; CUDA's low-precision GEMMs and convolutions "
                     "emulated in fp32 arithmetic on CPU")
    return {"tool": "precisionaudit", "version": __version__, "path": path, "entry": load.entry,
            "target": judged.as_dict(), "device": "cpu-emulated" if emulated else "cpu",
            "tolerance": tol.as_dict(), "seed": seed, "executions": counts,
            "wall_s": report_number(time.perf_counter() - started), "variants": variants,
            "passed": variants[-1]["status"] == "ok", "warnings": warnings, "notes": notes}


def _entry(name, run, ref_outputs, tol, target) -> dict:
    outputs, error, wall = run
    entry = {"name": name, "dtype": target.dtype, "mode": target.mode, "status": "error", "error": error,
             "outputs": [], "first_divergence": None, "gemm_flops_low_precision": None, "error_growth": [],
             "wall_s": report_number(wall)}
    if error is None:
        entry["outputs"] = compare_all(ref_outputs, dict(outputs), tol)
        entry["status"] = variant_status(entry["outputs"])
    return entry
