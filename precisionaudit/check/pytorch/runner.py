"""Run the A/B check: reference (fp32), baseline (the target policy), planned (policy + plan).

Exactly one forward per variant (and one backward with ``grad``); the probes, FLOP counter
and gradient hooks ride along on those runs. A variant that raises is a result (status
``error`` with the message); a reference that raises or is non-finite is not: the model or
its inputs are broken and no comparison means anything, so that is a UsageError.
"""
from __future__ import annotations

import contextlib
import copy
import dataclasses
import json
import time
from collections import Counter
from dataclasses import dataclass, field

import torch

from ... import __version__
from ...apply.pytorch import LOW, apply_plan, to_low_precision
from ...capture.pytorch.recorder import calls_the_model
from ...core.errors import UsageError
from ...core.target import Target
from ...core.values import NO_VALUES, ValueOptions
from ...plan.file import load_plan
from ...runtime.data import pytorch_batches
from ...runtime.pytorch import execution
from ...runtime.pytorch.losses import scalar_loss
from ...runtime.pytorch.source import open_source
from ...runtime.pytorch.user_code import describe, user_code
from ...runtime.sources import DEFAULT_LOAD, LoadOptions
from ..metrics import (
    BUDGET_ELEMENTS,
    check_reference,
    compare_all,
    report_number,
    variant_status,
)
from ..tolerance import tolerance_for
from . import quantized
from .divergence import Probe
from .flops import GemmFlops, LinearCensus
from .grads import (
    ActivationGrads,
    GradHistogram,
    compare_grads,
    loss_scale_report,
    param_grads,
)

GROWTH_ROWS = 200


@dataclass
class Run:
    name: str
    outputs: object = None
    error: str | None = None
    exception: BaseException | None = None  # what ``error`` describes: its traceback for --debug
    probe: Probe | None = None
    flops: GemmFlops | None = None
    linears: LinearCensus | None = None
    grads: dict | None = None
    wall_s: float = 0.0
    extra: dict = field(default_factory=dict)


def run_check(path: str, target: Target, plan=None, device: str = "auto", tolerance=None,
              seed: int = 0, grad: bool = False, load: LoadOptions = DEFAULT_LOAD, progress=None,
              values: ValueOptions = NO_VALUES) -> dict:
    """The check report (docs/check-report.md) of one model (a dict, JSON-ready): a model file,
    a Hugging Face directory or a ``module:callable`` (``path``, loaded with ``load``).

    With calibration data (``values.data``) every batch is checked; the report is the first
    failing batch's (else the last one's), with ``batch`` (its index) and ``data`` (the source) saying which.
    """
    with user_code(path, "the model's forward"):  # an exit from the forward is not a verdict
        return _run_check(path, target, plan, device, tolerance, seed, grad, load, progress, values)


def _run_check(path, target, plan, device, tolerance, seed, grad, load, progress, values) -> dict:
    started = time.perf_counter()
    plan_obj = load_plan(plan) if plan is not None else None
    session = Session(path, target, device, tolerance, seed, grad, load, progress=progress,
                      plans=[plan_obj] if plan_obj is not None else [], values=values)
    if plan_obj is not None:
        mismatch = plan_obj.target_mismatch(session.target.as_dict())
        if mismatch:
            session.warnings.append(mismatch)
    while True:
        variants = [session.reference_entry()]
        if session.target.recipe:  # FP8/FP4: bf16 autocast alone first, the FP8/FP4 target then
            variants.append(session.variant("bfloat16", quantized_linears=False))
        variants.append(session.variant("baseline"))
        if plan_obj is not None:
            variants.append(session.variant("planned", plan_obj))
        report = session.report(variants, time.perf_counter() - started)
        if not report["passed"] or not session.next_batch():
            break
    if values.data is not None:
        report.update(batch=session.index, data=values.data)
    return report


class Session:
    """One model loaded and its fp32 reference run once; low-precision variants (the
    baseline, a plan) are then run and compared against it one at a time, as ``check`` and
    ``plan --prune`` need. ``plans``: the plans to run, known up front (pure mode converts
    their models before the reference runs); ``None`` when they are not known (``plan
    --prune``): they are then made from a pristine copy kept before the reference.
    ``values``: real weights (--weights) and the batches to run (--data, else the example
    inputs); ``next_batch`` moves on to the next one, the variants' models kept."""

    def __init__(self, path: str, target: Target, device: str = "auto", tolerance=None, seed: int = 0,
                 grad: bool = False, load: LoadOptions = DEFAULT_LOAD,
                 *, progress=None, plans=None, values: ValueOptions = NO_VALUES):
        self.path, self.seed, self.grad = path, seed, grad
        self.progress = progress or (lambda message: None)
        self.runtime = runtime = execution.resolve(device)
        self.target = target = dataclasses.replace(target, device=runtime.policy_device)
        self.tol = tolerance or tolerance_for(target.named_dtype)
        self.warnings: list[str] = []
        self.progress("loading the model")
        source = open_source(path, load)
        self.entry = source.entry
        model, self._batches = _load(source, seed, runtime, values)
        self.model = model
        self._keep_models = values.data is not None  # the variants run again on the next batch
        self.counts = {"forward": 0, "backward": 0}
        self.runs: list[Run] = []  # the variants run so far, for the notes
        # variants' models are made before the reference runs: a forward may leave state on
        # the model (rotary cos/sin caches as plain attributes) that model.half() never
        # converts and that autocast would build in the low dtype
        self._models = {plan_key(None): _variant_model(model, target, None)}
        if target.recipe:  # the bf16 autocast variant an FP8/FP4 check also runs
            self._models["bf16"] = _variant_model(model, target, None)
        for plan in plans or ():
            self._models[plan_key(plan)] = _variant_model(model, target, plan)
        self._pristine = None
        if plans is None:  # plan --prune: variants to come are made from a copy kept before the reference
            self._pristine = copy.deepcopy(model) if target.mode == "pure" else _variant_model(model, target, None)

        self.index = -1
        if not self.next_batch():
            raise UsageError(f"{path}: no input batch to check")

    def next_batch(self) -> bool:
        """Run the fp32 reference on the next input batch; False when there is none."""
        batch = next(self._batches, None)
        if batch is None:
            return False
        self.index += 1
        self.args, self.kwargs = batch
        self.runs = []
        path, seed, grad, target = self.path, self.seed, self.grad, self.target
        histogram = GradHistogram() if grad else None
        self.batch = _describe_inputs(self.args, self.kwargs)
        self.progress(f"reference (float32), batch {self.batch}")
        self.ref = ref = _execute("reference", self.model, self.args, self.kwargs, seed, self.tol, self.counts,
                                  reference=None, policy=execution.strict_fp32(),
                                  numerics=contextlib.nullcontext(), grad=grad, histogram=histogram)
        if ref.error is not None:
            raise UsageError(f"{path}: the fp32 reference run failed ({ref.error}): the model or its "
                             "example inputs are broken before any low precision") from ref.exception
        self.ref_outputs = execution.named_outputs(ref.outputs)
        check_reference(path, self.ref_outputs)
        self.loss_fn = ref.extra.get("loss_fn")
        self.scale = 1.0
        self.gradients = None
        if grad:
            self.gradients = loss_scale_report(histogram, target.dtype)
            self.scale = self.gradients["recommended_init_scale"]
            if "warning" in self.gradients:
                self.warnings.append(self.gradients["warning"])
        return True

    def reference_entry(self) -> dict:
        return {"name": "reference", "dtype": "float32", "status": "ok", "error": None,
                "wall_s": report_number(self.ref.wall_s)}

    def variant(self, name: str, plan=None, quantized_linears: bool = True) -> dict:
        """The report entry of one low-precision run, with ``plan`` applied if given. Under
        an FP8/FP4 target the eligible Linears (less the plan's keep_out_of_fp8/fp4) run in
        FP8/FP4, unless ``quantized_linears`` is False (the bf16 autocast variant)."""
        target, runtime = self.target, self.runtime
        key = plan_key(plan) if plan is not None or quantized_linears else "bf16"
        model = self._models.get(key) if self._keep_models else self._models.pop(key, None)
        if model is None:
            model = _variant_model(self.model if self._pristine is None else self._pristine, target, plan)
        choice = None
        policy = execution.policy(runtime, target)
        if target.recipe and quantized_linears:
            choice = quantized.choose(model, target.recipe, plan.keep_out(target) if plan is not None else (),
                                      self.seed)
            policy = _both(policy, quantized.quantized_linears(model, choice))
        handle = apply_plan(model, plan, warn=False, compilable=False) if plan is not None else None
        named = (target.fp4 or f"float8 {target.recipe}") if choice is not None else target.dtype
        self.progress(f"{name} ({named}, {target.mode}), batch {self.batch}, run {self.counts['forward'] + 1}")
        try:
            run = _execute(name, model, *_variant_inputs(self.args, self.kwargs, target, runtime.torch_device),
                           self.seed, self.tol, self.counts, reference=self.ref.probe,
                           policy=policy, numerics=execution.numerics(runtime),
                           grad=self.grad, loss_fn=self.loss_fn, scale=self.scale)
        finally:
            if handle is not None:
                handle.remove()
        self.runs.append(run)
        entry = _variant_entry(run, self.ref_outputs, self.ref, self.tol, target)
        if choice is not None:
            kind = choice.kind
            named_format = {"recipe": target.recipe} if kind == "fp8" else {}
            share = run.flops.share_of(quantized.FORMAT_NAMES[kind])
            entry.update(dtype=target.named_dtype, **named_format, **{kind: choice.as_dict()},
                         **{f"gemm_flops_{kind}": None if run.error else report_number(share)})
            gemm = choice.below(self.tol.gemm_snr_db)
            if gemm is not None and entry["status"] == "ok":  # a quantized GEMM below its own bar
                entry["status"] = "exceeds_tolerance"
                entry["first_divergence"] = run.probe.first_divergence() or gemm
            for path in choice.unmatched:
                self.warnings.append(f"{plan.source}: keep_out_of_{kind} entry {path!r} names no nn.Linear "
                                     "of the model")
        if plan is not None:
            entry["plan"] = {"path": plan.source, "overrides": len(plan.overrides),
                             "gemm_flops_low_precision": entry["gemm_flops_low_precision"],
                             "unmatched": [o.module for o in handle.unmatched],
                             "unused": [o.module for o in handle.unused_ops()] if run.error is None else []}
            for o in handle.unmatched:
                self.warnings.append(f"{plan.source}: override {o.module!r} matches no module of the model")
        return entry

    def report(self, variants: list, wall_s: float) -> dict:
        runtime, target = self.runtime, self.target
        notes = list(runtime.notes) + _measurement_notes(self.ref, self.runs)
        if target.recipe:
            notes.append(quantized.emulation_note(target.recipe))
        if runtime.emulated_ops:
            notes.append("computed in float32 and rounded to the low dtype (no CPU kernel for it; "
                         "CUDA has one): " + ", ".join(sorted(runtime.emulated_ops)))
        planned = next((v for v in variants if v["name"] == "planned"), None)
        if planned is not None and planned["status"] == "error" and variants[0]["status"] != "error":
            planned["defect"] = "plan"  # the model runs without the plan: the plan made it raise
            self.warnings.append(f"the plan makes the model raise where it runs without the plan ({planned['error']}): "
                                 "a defect of the plan, not of the model")
        report = {"tool": "precisionaudit", "version": __version__, "path": self.path, "entry": self.entry,
                  "target": target.as_dict(), "device": runtime.name, "tolerance": self.tol.as_dict(),
                  "seed": self.seed, "executions": self.counts, "wall_s": report_number(wall_s),
                  "variants": variants, "passed": variants[-1]["status"] == "ok",
                  "warnings": list(dict.fromkeys(self.warnings)), "notes": notes}
        if self.gradients is not None:
            report["gradients"] = self.gradients
        return report


@contextlib.contextmanager
def _both(outer, inner):
    with outer, inner:
        yield


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
def _load(source, seed, runtime, values):
    """The model (its weights: --weights, else its own init from ``seed``) and an iterator
    over the input batches (--data, else the example inputs)."""
    if not source.has_inputs:
        source.example_inputs("check")  # says what is missing, before the model is built
    model = source.build_loaded(values.weights, seed)  # fp32 (the reference), eval
    torch.manual_seed(seed)
    example = source.example_inputs("check")
    model.to(runtime.torch_device)
    batches = [example] if values.data is None else pytorch_batches(values.data, source, example, values.batches)
    # inputs handed over in fp16/bf16 are widened: the reference is fp32
    return model, (_widen(execution.to_device(batch, runtime.torch_device)) for batch in batches)


def _describe_inputs(args, kwargs) -> str:
    """The example inputs' tensor shapes, as progress shows them: ``2x256`` or ``(2x3, 2x3)``."""
    from torch.utils import _pytree as pytree
    shapes = ["x".join(map(str, t.shape)) or "scalar" for t in pytree.tree_leaves((args, kwargs))
              if isinstance(t, torch.Tensor)]
    return shapes[0] if len(shapes) == 1 else f"({', '.join(shapes)})"


def _widen(tree):
    from torch.utils import _pytree as pytree
    return pytree.tree_map_only(torch.Tensor, lambda t: t.float() if t.dtype in LOW else t, tree)


def plan_key(plan) -> str | None:
    """What a variant's model is made from: the plan's content (None: no plan). Not ``id(plan)``:
    an id is reused once its plan is freed, and an equal plan read again has another."""
    return None if plan is None else json.dumps(plan.to_dict(), sort_keys=True)


def _variant_model(model, target, plan):
    """Pure variants get a converted copy; autocast variants a copy that shares the fp32
    parameters and buffers. Either is made before the reference runs: state a forward leaves
    on the model (rotary cos/sin caches as plain attributes, built on first use) must be
    built by the variant itself, in its own dtypes, as in training."""
    if target.mode != "pure":
        shared = {id(t): t for t in [*model.parameters(), *model.buffers()]}
        return copy.deepcopy(model, shared)
    clone = copy.deepcopy(model)
    if plan is not None:
        return to_low_precision(clone, plan, target.torch_dtype)
    return clone.to(target.torch_dtype)


def _variant_inputs(args, kwargs, target, device):
    if target.mode != "pure":
        return args, kwargs
    return execution.to_device((args, kwargs), device, target.torch_dtype)


# --------------------------------------------------------------------------- one execution
@calls_the_model
def _execute(name, model, args, kwargs, seed, tol, counts, *, reference, policy, numerics, grad,
             loss_fn=None, scale=1.0, histogram=None) -> Run:
    run = Run(name, probe=Probe(model, tol, reference), flops=GemmFlops(), linears=LinearCensus(model))
    model.zero_grad(set_to_none=True)
    torch.manual_seed(seed)
    started = time.perf_counter()
    activations = ActivationGrads(histogram) if histogram is not None else contextlib.nullcontext()
    try:
        with numerics:
            with torch.set_grad_enabled(grad), run.probe, activations, policy, run.flops, run.linears:
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
        run.error, run.exception = describe(exc), exc
    run.wall_s = time.perf_counter() - started
    return run


def _variant_entry(run: Run, ref_outputs, ref: Run, tol, target) -> dict:
    entry = {"name": run.name, "dtype": target.dtype, "mode": target.mode, "status": "error",
             "error": run.error, "outputs": [], "first_divergence": run.probe.first_divergence(),
             # a forward that raised ran part of its GEMMs: no share to report
             "gemm_flops_low_precision": None if run.error else report_number(run.flops.low_share()),
             # the nn.Linear modules that ran their GEMM in the low dtype, of those that ran
             "linear_modules_low_precision": None if run.error or not run.linears.total else
             {"low": run.linears.low, "total": run.linears.total},
             "error_growth": [{**row, "rel_error": report_number(row["rel_error"])}
                              for row in run.probe.rows[:GROWTH_ROWS]],
             "wall_s": report_number(run.wall_s)}
    if run.error is None:
        entry["outputs"] = compare_all(ref_outputs, dict(execution.named_outputs(run.outputs)), tol)
        entry["status"] = variant_status(entry["outputs"])
    if run.grads is not None and ref.grads is not None:
        entry["gradients"] = compare_grads(ref.grads, run.grads)
        if entry["gradients"].get("nonfinite") and entry["status"] == "ok":
            entry["status"] = "nonfinite"
    if entry["status"] == "ok":
        entry["first_divergence"] = None  # intermediate wobbles the outputs absorb are no divergence
    return entry
