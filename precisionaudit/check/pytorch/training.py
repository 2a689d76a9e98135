"""``check --train``: real optimizer steps in fp32, in the target precision, and with a plan.

``train_check`` builds the model once from ``seed``, copies it before any step, and trains
the copies side by side on the same batches: the fp32 reference, the baseline (the target
as users run it, train_runs) and, with a plan, the planned run. Each low-precision step is
compared with the reference's same step (train_measures); the report holds per variant the
loss curve, the loss-scale trajectory and skipped steps, the drift against fp32, the
measures per module, a verdict, and the findings (PA304-PA306) the measures support.

Bad input is a UsageError with one line: steps < 1, an optimizer factory that raises or
returns no optimizer, a loss that is not a scalar, no trainable parameter, and an fp32
reference that itself goes non-finite (then no precision is to blame).
"""
from __future__ import annotations

import contextlib
import copy
import dataclasses
import math
import time
from dataclasses import dataclass, field

import torch

from ... import __version__
from ...apply.pytorch import LOW, apply_plan, to_low_precision
from ...core.errors import UsageError
from ...core.target import Target
from ...plan.file import load_plan
from ...runtime.pytorch import execution
from ...runtime.pytorch.cuda_autocast import emulated_cuda_autocast
from ...runtime.pytorch.losses import scalar_loss
from ...runtime.pytorch.model_file import as_module, call_user, split_inputs
from ...runtime.pytorch.source import open_source
from ...runtime.pytorch.user_code import describe, user_code
from ...runtime.sources import DEFAULT_LOAD, LoadOptions
from ..metrics import report_number
from ..training_findings import training_findings
from . import quantized
from .grads import ActivationGrads, GradHistogram, loss_scale_report
from .train_measures import (ReferenceMoves, RunMeasures, by_module, by_parameter, public, reference_step,
                             whole_model_drift)
from .train_runs import Run, make_optimizer, trainable

GRADSCALER_INIT = 2.0 ** 16


@dataclass(frozen=True)
class TrainTolerance:
    """When a run trains like fp32: its final drift (|p - p_fp32| / |p_fp32 - p_0|) is at
    most ``drift`` (None: not judged), and its loss over the last quarter of the steps is
    within ``loss`` of fp32's, relative to how far fp32's loss moved from its start (at least
    ``loss_atol``)."""

    drift: float | None = 0.5
    loss: float = 0.25
    loss_atol: float = 1e-3

    def as_dict(self) -> dict:
        return {"drift": self.drift, "loss": self.loss, "loss_atol": self.loss_atol}


#: FP4 training is judged by its loss: its gradients are noisy by design (stochastic rounding,
#: 2 significant bits), and Adam's normalised steps turn that noise into parameter drift of the
#: size of the steps themselves from the first step on, where the loss follows fp32's (the NVFP4
#: pretraining paper judges its runs by the loss gap: about 1% at 1T tokens). Drift is reported.
FP4_TRAIN_TOLERANCE = TrainTolerance(drift=None)


@dataclass
class TrainReport:
    """The report of ``check --train`` (``to_dict()``: JSON-ready)."""

    path: str
    target: dict
    device: str
    steps: int
    lr: float
    seed: int
    tolerance: dict
    variants: list
    findings: list  # core.findings.Finding
    passed: bool
    wall_s: float
    warnings: list = field(default_factory=list)
    notes: list = field(default_factory=list)
    gradients: dict | None = None  # fp16: the reference's gradient range and loss-scale advice

    def variant(self, name: str) -> dict:
        return next(v for v in self.variants if v["name"] == name)

    def to_dict(self) -> dict:
        return {"tool": "precisionaudit", "version": __version__, "path": self.path, "train": True,
                "target": self.target, "device": self.device, "steps": self.steps, "lr": self.lr,
                "seed": self.seed, "tolerance": self.tolerance, "variants": self.variants,
                "findings": [f.to_json() for f in self.findings], "passed": self.passed,
                "wall_s": report_number(self.wall_s), "warnings": self.warnings, "notes": self.notes,
                **({"gradients": self.gradients} if self.gradients is not None else {})}


def train_check(model_factory, batches, target: Target, *, steps: int = 20, lr: float = 1e-4, seed: int = 0,
                optimizer_factory=None, loss_fn=None, plan=None, scaler: bool = True, device: str = "auto",
                tolerance: TrainTolerance | None = None, path: str = "<model>", entry: str = "get_model",
                rules=None) -> TrainReport:
    """Train fp32, the target and (with ``plan``) the planned target side by side; measure.

    ``batches``: one example input or a list of them (a tensor, a tuple of args or a dict of
    kwargs each), used in turn, one per step. ``optimizer_factory(params)`` (default
    ``AdamW(params, lr=lr)``); ``loss_fn(outputs, (args, kwargs))`` (default: the output's
    ``.loss``, else ``check --grad``'s fixed scalar loss). ``scaler``: how the fp16 autocast
    baseline scales its loss: True, torch.amp.GradScaler's defaults (the PyTorch AMP
    recipe); False, not at all; a dict, GradScaler's keyword arguments (``init_scale``,
    ``growth_factor``, ``backoff_factor``, ``growth_interval``).
    """
    started = time.perf_counter()
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise UsageError(f"--steps must be a whole number of at least 1 (got {steps!r})")
    if not (isinstance(lr, (int, float)) and math.isfinite(lr) and lr > 0):
        raise UsageError(f"--lr must be a positive number (got {lr!r})")
    runtime = execution.resolve(device)
    target = dataclasses.replace(target, device=runtime.policy_device)
    if target.fp8_recipe:
        raise UsageError("check --train --dtype float8 is not supported: the FP8 check emulates the forward only")
    tol = tolerance or (FP4_TRAIN_TOLERANCE if target.fp4 else TrainTolerance())
    plan_obj = load_plan(plan) if plan is not None else None
    if plan_obj is not None:
        plan_obj.require_pytorch()
    factory = optimizer_factory or (lambda params: torch.optim.AdamW(params, lr=lr))

    torch.manual_seed(seed)
    model = as_module(call_user(model_factory, path, entry), path, entry)
    model._apply(lambda t: t.float() if t.dtype in LOW else t)
    model.to(runtime.torch_device).eval()
    trainable(model, path)
    data = [_split(b, path) for b in (batches if isinstance(batches, list) else [batches])]
    if not data:
        raise UsageError(f"{path}: no batch to train on")
    data = [_widen(execution.to_device(b, runtime.torch_device)) for b in data]
    pristine = copy.deepcopy(model)  # every variant starts from these weights

    ref = _reference_run(model, factory, path)
    initial = {n: t.detach().clone() for n, t in ref.held.items()}
    loss = _Loss(loss_fn, seed, path)
    warnings, notes = [], list(runtime.notes)
    # the last run takes the pristine copy itself: no model is held that no run trains
    runs = [_low_run("baseline", pristine if plan_obj is None else copy.deepcopy(pristine), target, runtime,
                     None, factory, scaler, path, seed)]
    if plan_obj is not None:
        mismatch = plan_obj.target_mismatch(target.as_dict())
        if mismatch:
            warnings.append(mismatch)
        runs.append(_low_run("planned", pristine, target, runtime, plan_obj, factory, scaler, path, seed))
        if plan_obj.master_weights and target.mode == "autocast":
            notes.append("master_weights: autocast keeps the weights in float32 already; nothing to do")
    del pristine
    moves = ReferenceMoves()
    measures = {r.name: RunMeasures(ref, moves, initial) for r in runs}
    errors: dict[str, str] = {}

    histogram = GradHistogram() if target.dtype == "float16" else None
    with _autocast_rules(runtime, target):
        _train(ref, runs, measures, moves, errors, data, steps, loss, seed, path, histogram)
    gradients = loss_scale_report(histogram, target.dtype) if histogram is not None else None

    variants = [_reference_entry(ref)]
    for run in runs:
        entry = _variant_entry(run, ref, measures[run.name], initial, target, tol, errors.get(run.name),
                               plan_obj if run.name == "planned" else None)
        if histogram is not None:
            used = entry["loss_scale"]["init"] if entry["loss_scale"] else 1.0
            entry["grad_underflow_at_scale"] = {"scale": used, **histogram.underflow(used)}
        variants.append(entry)
    if runtime.emulated_ops:
        notes.append("computed in float32 and rounded to the low dtype (no CPU kernel for it; CUDA has one): "
                     + ", ".join(sorted(runtime.emulated_ops)))
    notes.append("the runs use eval mode (dropout off), so that they differ in precision only")
    if target.fp4:
        notes.append(quantized.fp4_note(target.fp4) + "; every step's forward and backward")
    findings = training_findings(variants, target.as_dict(), path, f"{path}:{entry}", rules=rules,
                                 gradients=gradients)
    return TrainReport(path=path, target=target.as_dict(), device=runtime.name, steps=steps, lr=lr, seed=seed,
                       tolerance=tol.as_dict(), variants=variants, findings=findings,
                       passed=variants[-1]["status"] == "ok", wall_s=time.perf_counter() - started,
                       warnings=warnings, notes=notes, gradients=gradients)


def _train(ref, runs, measures, moves, errors, data, steps, loss, seed, path, histogram=None) -> None:
    """``steps`` steps of every run in lockstep: the reference first, then each low-precision
    run, compared with the reference's same step. A run that raises stops (its error is its
    result); one that goes non-finite stops too. Gradients are dropped once measured (each
    step sets them anew), so that no run's lie beside the next run's step."""
    buffers = {}  # the reference's snapshot, taken right before its optimizer step, then its update

    def snapshot():
        buffers["before"] = {n: p.detach().clone() for n, p in ref.held.items()}
    for t in range(steps):
        args, kwargs = data[t % len(data)]
        watch = ActivationGrads(histogram) if histogram is not None and t == 0 else contextlib.nullcontext()
        try:
            with watch:
                result = ref.step(t, args, kwargs, loss.for_run(ref), seed, path, before_update=snapshot)
        except UsageError:
            raise
        except Exception as exc:  # noqa: BLE001
            raise UsageError(f"{path}: the fp32 reference training step {t} failed ({describe(exc)}): "
                             "the model, its inputs or its loss are broken before any low precision") from exc
        if result.nonfinite is not None:
            what = "its loss" if result.nonfinite == "loss" else f"parameter {result.nonfinite}"
            raise UsageError(f"{path}: the fp32 reference diverges ({what} is inf/NaN at step {t}): not a "
                             "precision problem; lower --lr or fix the model")
        if histogram is not None and t == 0:
            for g in ref.grads().values():
                histogram.add(g)
        ref_step = reference_step(ref, buffers["before"])
        ref.drop_grads()
        for run in runs:
            if run.stopped_at is not None or run.name in errors:
                continue
            measures[run.name].before_step(run)
            try:
                step = run.step(t, args, kwargs, loss.for_run(run), seed, path,
                                before_update=lambda run=run: measures[run.name].before_update(run))
            except UsageError:
                raise
            except Exception as exc:  # noqa: BLE001 - a variant that raises is its result
                errors[run.name] = describe(exc)
                measures[run.name].stop()  # measured through step t - 1
                run.drop_grads()
                continue
            measures[run.name].after_step(run, step, ref_step)
            run.drop_grads()
        moves.add(ref_step)
        for run in runs:
            if run.stopped_at is not None:
                measures[run.name].stop()  # measured through this step (a no-op once stopped)
        buffers.clear()  # the update is not kept across the next forward and backward
        del ref_step


def _autocast_rules(runtime, target):
    """CUDA's autocast rules on CPU, registered once for the whole run (registering them
    costs ~0.1 s); autocast itself stays off except around an autocast run's forwards."""
    if runtime.name != "cpu-emulated" or target.mode != "autocast":
        return contextlib.nullcontext()
    stack = contextlib.ExitStack()
    stack.enter_context(emulated_cuda_autocast(target.torch_dtype))
    stack.enter_context(torch.autocast("cpu", enabled=False))
    return stack


# --------------------------------------------------------------------------- the runs
def _reference_run(model, factory, path) -> Run:
    params = trainable(model, path)
    optimizer = make_optimizer(factory, list(params.values()), path)
    # strict fp32 around the forward and the backward: no TF32 matmuls or cuDNN convolutions
    return Run("reference", model, optimizer, params, held=params, numerics=execution.strict_fp32)


def _low_run(name, model, target, runtime, plan, factory, scaler_on, path, seed=0) -> Run:
    low = target.torch_dtype
    pure = target.mode == "pure"
    masters = bool(pure and plan is not None and plan.master_weights == "float32")
    fp32 = {n: p.detach().clone() for n, p in model.named_parameters()} if masters else {}
    if pure:
        model = to_low_precision(model, plan, low) if plan is not None else model.to(low)
    handle = apply_plan(model, plan, warn=False, compilable=False) if plan is not None and plan.overrides else None
    choice = None
    if target.fp4:  # the eligible Linears' three GEMMs in FP4 for the whole run (the copy is the run's own)
        choice = quantized.choose(model, target.fp4, plan.keep_out(target) if plan is not None else (), seed)
        quantized.patch(model, choice)
    params = trainable(model, path)
    # master weights start from the fp32 weights, as apex O2 / DeepSpeed copy them before model.half()
    held = ({n: torch.nn.Parameter(fp32[n].detach().float().clone()) for n in params} if masters else params)
    optimizer = make_optimizer(factory, list(held.values()), path)
    scaler = None
    settings = dict(scaler_on) if isinstance(scaler_on, dict) else {}
    init = plan.loss_scale["init"] if plan is not None and plan.loss_scale else None
    if init is not None or (target.dtype == "float16" and not pure and scaler_on):
        if pure and not masters and any(p.dtype == torch.float16 for p in params.values()):
            raise UsageError(f"{getattr(plan, 'source', '<plan>')}: loss_scale in pure float16 needs "
                             "master_weights: float32 (torch.amp.GradScaler refuses float16 gradients: "
                             "'Attempting to unscale FP16 gradients')")
        settings["init_scale"] = init or settings.get("init_scale", GRADSCALER_INIT)
        scaler = torch.amp.GradScaler(runtime.torch_device.type, **settings)
    if pure:
        policy = None
    elif runtime.name == "cpu-emulated":  # the rules are registered once (_autocast_rules)
        policy = lambda: torch.autocast("cpu", dtype=low)  # noqa: E731
    else:
        policy = lambda: execution.policy(runtime, target)  # noqa: E731
    return Run(name, model, optimizer, params, held, scaler=scaler, masters=masters,
               input_dtype=low if pure else None, policy=policy,
               numerics=lambda: execution.numerics(runtime), plan_handle=handle, quantized=choice)


class _Loss:
    """The loss every run uses: the user's ``get_loss(outputs, inputs)``, else the output's
    ``.loss``, else ``check --grad``'s fixed scalar loss (its random weights drawn once)."""

    def __init__(self, user_fn, seed, path):
        self.user_fn, self.seed, self.path = user_fn, seed, path
        self._default = None

    def for_run(self, run):
        return self if self.user_fn is None else self._user

    def _user(self, outputs, inputs):
        try:
            with user_code(self.path, "get_loss()"):
                return self.user_fn(outputs, inputs)
        except UsageError:
            raise
        except Exception as exc:  # noqa: BLE001 - a loss that raises is the variant's error
            raise RuntimeError(f"get_loss(outputs, inputs) raised {describe(exc)}") from exc

    def __call__(self, outputs, inputs):
        loss = getattr(outputs, "loss", None)
        if isinstance(loss, torch.Tensor):
            return loss.float()
        if self._default is None:
            self._default = scalar_loss(outputs, self.seed)
        value = self._default(outputs)
        if value is None:
            raise UsageError(f"{self.path}: the model returns no floating-point output to make a loss "
                             "from; define get_loss(outputs, inputs)")
        return value


def _split(batch, path):
    return split_inputs(batch, path, "get_batches")


def _widen(tree):
    from torch.utils import _pytree as pytree
    return pytree.tree_map_only(torch.Tensor, lambda t: t.float() if t.dtype in LOW else t, tree)


# --------------------------------------------------------------------------- the report
def _reference_entry(ref: Run) -> dict:
    return {"name": "reference", "dtype": "float32", "status": "ok", "error": None,
            "loss": [report_number(s.loss) for s in ref.steps]}


def _variant_entry(run: Run, ref: Run, measures, initial, target, tol: TrainTolerance, error, plan) -> dict:
    losses = [s.loss for s in run.steps]
    entry = {"name": run.name, "dtype": target.dtype, "mode": target.mode, "error": error,
             "loss": [report_number(x) for x in losses],
             "optimizer_state_dtype": _state_dtype(run),
             "master_weights": "float32" if run.masters else None,
             "loss_scale": None, "first_nonfinite": None}
    if run.scaler is not None:
        entry["loss_scale"] = {"init": run.steps[0].scale if run.steps else None,
                               "trajectory": [s.scale for s in run.steps],
                               "skipped_steps": [i for i, s in enumerate(run.steps) if s.skipped]}
    if run.stopped_at is not None:
        what = run.steps[run.stopped_at].nonfinite
        entry["first_nonfinite"] = {"step": run.stopped_at, "what": what,
                                    "module": None if what == "loss" else what.rpartition(".")[0]}
    if run.quantized is not None:
        entry[run.quantized.kind] = run.quantized.as_dict()
    rows = by_parameter(run.model, measures, run, ref, initial)
    entry["modules"] = [_numbers(row) for row in by_module(rows)]
    entry["parameters"] = [_numbers(public(row)) for row in rows]
    entry["drift"] = report_number(whole_model_drift(rows)) if measures.initial else None
    entry["loss_gap"] = report_number(_loss_gap(losses, [s.loss for s in ref.steps], tol))
    entry["eps"] = run.eps()
    if error is not None:
        entry["status"] = "error"
    elif run.stopped_at is not None:
        entry["status"] = "nonfinite"
    elif entry["loss_gap"] is None or entry["loss_gap"] > tol.loss \
            or (tol.drift is not None and any(m["drift"] is None or m["drift"] > tol.drift for m in entry["modules"])):
        entry["status"] = "diverges"
    else:
        entry["status"] = "ok"
    if plan is not None:
        entry["plan"] = {"path": plan.source, "keep_fp32_modules": list(plan.keep_fp32_modules),
                         "master_weights": plan.master_weights, "loss_scale": plan.loss_scale,
                         "overrides": len(plan.overrides),
                         "unmatched": [o.module for o in run.plan_handle.unmatched] if run.plan_handle else []}
    return entry


def _loss_gap(losses, ref_losses, tol) -> float:
    """Mean |loss - fp32 loss| over the last quarter of the steps, over how far fp32's loss
    moved from its first value (at least ``loss_atol``); inf when the run stopped early."""
    if len(losses) < len(ref_losses) or not all(math.isfinite(x) for x in losses):
        return math.inf
    tail = max(1, len(ref_losses) // 4)
    gap = sum(abs(a - b) for a, b in zip(losses[-tail:], ref_losses[-tail:])) / tail
    moved = max(abs(ref_losses[0] - x) for x in ref_losses)
    return gap / max(moved, tol.loss_atol)


def _state_dtype(run: Run) -> str | None:
    """The dtype of the optimizer's second moment (``exp_avg_sq``), else of its first
    per-element state tensor; None before any state exists."""
    for key in ("exp_avg_sq", None):
        for name in run.keys:
            state = getattr(run.optimizer, "state", {}).get(run.keys[name]) or {}
            for k, value in state.items():
                if (key is None or k == key) and isinstance(value, torch.Tensor) \
                        and value.is_floating_point() and value.dim():
                    return str(value.dtype).removeprefix("torch.")
    return None


def _numbers(row: dict) -> dict:
    return {k: report_number(v) if isinstance(v, float) else v for k, v in row.items()}


# --------------------------------------------------------------------------- a model file
def train_check_file(path: str, target: Target, *, steps: int = 20, lr: float = 1e-4, seed: int = 0,
                     plan=None, device: str = "auto", scaler: bool = True, load: LoadOptions = DEFAULT_LOAD,
                     tolerance: TrainTolerance | None = None, rules=None) -> TrainReport:
    """``train_check`` on a model (a model file, a Hugging Face directory, a ``module:callable``):
    its factory, its batches (``get_batches()`` if the model file defines it, else the example
    inputs), ``get_optimizer(params)`` and ``get_loss(outputs, inputs)`` when defined (else
    AdamW(lr) and the default loss), and ``get_grad_scaler()`` when defined: None (the loss is
    not scaled) or the ``torch.amp.GradScaler`` the training script makes (its settings are used)."""
    source = open_source(path, load)
    get_batches = source.function("get_batches")
    if get_batches is None and not source.has_inputs:
        raise UsageError(f"{path}: check --train needs batches: no function get_batches() and "
                         f"{source.missing_inputs}")
    get_scaler = source.function("get_grad_scaler")
    if get_scaler is not None:
        scaler = scaler_settings(call_user(get_scaler, path, "get_grad_scaler"), path)
    torch.manual_seed(seed)
    if get_batches is not None:
        batches = call_user(lambda: list(get_batches()), path, "get_batches")
        if not batches:
            raise UsageError(f"{path}: get_batches() gave no batch")
    else:
        args, kwargs = source.example_inputs("check --train")
        batches = [kwargs if kwargs else args]
    with user_code(path, "the training step"):  # an exit from user code is not a verdict
        return train_check(source.make_model, batches, target, steps=steps, lr=lr, seed=seed,
                           optimizer_factory=source.function("get_optimizer"), loss_fn=source.function("get_loss"),
                           plan=plan, scaler=scaler, device=device, tolerance=tolerance, path=path,
                           entry=source.entry, rules=rules)


SCALER_SETTINGS = {"init_scale": "_init_scale", "growth_factor": "_growth_factor",
                   "backoff_factor": "_backoff_factor", "growth_interval": "_growth_interval"}


def scaler_settings(scaler, path: str):
    """What ``get_grad_scaler()`` returned, as ``train_check``'s ``scaler``: False for None, a
    dict of the GradScaler's settings for one (a ``GradScaler("cuda")`` made without a GPU
    disables itself and keeps none: torch's defaults then)."""
    if scaler is None:
        return False
    if not isinstance(scaler, torch.amp.GradScaler):
        raise UsageError(f"{path}: get_grad_scaler() returned {type(scaler).__name__}; return a "
                         "torch.amp.GradScaler, or None when the loss is not scaled")
    return {key: getattr(scaler, attr) for key, attr in SCALER_SETTINGS.items() if hasattr(scaler, attr)}
