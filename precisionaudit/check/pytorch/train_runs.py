"""One training run of ``check --train``: a model, its optimizer, and how the user steps it.

Three kinds of run share one stepping loop, so that they differ only in precision:

- the fp32 reference (strict fp32 matmuls);
- autocast: fp32 parameters and optimizer state, the forward under CUDA's autocast policy
  (emulated on CPU as ``check`` does), and for float16 a dynamic ``torch.amp.GradScaler``.
  torch 2.13's ``GradScaler("cpu")`` runs the same ``_amp_foreach_non_finite_check_and_unscale_``
  and ``_amp_update_scale_`` ops as CUDA's on CPU tensors, so the real class is used, never a
  copy of its logic: init scale 2^16, growth 2 every 2000 clean steps, backoff 0.5 and the
  optimizer step skipped on any inf/NaN gradient;
- pure: ``model.to(low)`` (a plan's ``keep_fp32_modules`` stay fp32) and the optimizer built
  on those parameters, so its state is low-precision too (Adam's ``zeros_like(param)``). No
  scaler: ``GradScaler`` refuses fp16 gradients ("Attempting to unscale FP16 gradients").
  A plan's ``master_weights: float32`` makes the optimizer step fp32 copies instead; the
  low-precision parameters are then their rounding after every step (apex O2, DeepSpeed).

A step records what the measures need: the loss, the gradients as backward left them (at
the scale used), which optimizer-held elements changed, and whether the scaler skipped.
The runs use the model in eval mode (dropout off): the variants then differ in precision
only, not in random masks.
"""
from __future__ import annotations

import contextlib
import math
import warnings
from dataclasses import dataclass, field

import torch

from ...core.errors import UsageError
from ...runtime.pytorch import execution
from ...runtime.pytorch.user_code import describe, user_code


@dataclass
class StepResult:
    loss: float
    scale: float | None = None  # the loss scale this step's backward used
    skipped: bool = False  # GradScaler found inf/NaN gradients and skipped optimizer.step()
    nonfinite: str | None = None  # what went inf/NaN first: "loss" or a parameter name


@dataclass
class Run:
    """A model and its optimizer, stepped the way one variant is trained."""

    name: str
    model: torch.nn.Module
    optimizer: object
    params: dict  # name -> the model's parameter (trainable ones)
    held: dict  # name -> the tensor the optimizer updates (the parameter, or its fp32 master)
    scaler: object = None
    masters: bool = False
    input_dtype: torch.dtype | None = None  # pure mode: inputs cast to the low dtype
    policy: object = None  # () -> the forward's context (autocast emulation)
    numerics: object = None  # () -> forward and backward's context (kernel emulation)
    steps: list = field(default_factory=list)
    stopped_at: int | None = None  # the step at which it went non-finite (no more steps run)
    plan_handle: object = None
    quantized: object = None  # check.pytorch.quantized.Choice: the Linears run in FP4 (FP4 targets)
    keys: dict = field(default_factory=dict)  # name -> the tensor the optimizer steps (its state's key)

    def __post_init__(self):
        self.keys = dict(self.held)

    def step(self, index: int, args, kwargs, loss_fn, seed: int, path: str, before_update=None) -> StepResult:
        """One training step; ``before_update()`` is called right before the optimizer's."""
        model, optimizer, scaler = self.model, self.optimizer, self.scaler
        if self.input_dtype is not None:
            args, kwargs = execution.to_device((args, kwargs), _device_of(model), self.input_dtype)
        for p in self.params.values():
            p.grad = None
        if self.masters:
            for m in self.held.values():
                m.grad = None
        torch.manual_seed(seed + index)
        scale = scaler.get_scale() if scaler is not None else None
        with (self.numerics or contextlib.nullcontext)(), warnings.catch_warnings():
            # a kept-fp32 norm on low-precision inputs: torch notes that it is not fused
            warnings.filterwarnings("ignore", message="Mismatch dtype between input and weight")
            with (self.policy or contextlib.nullcontext)():
                with user_code(path, "the model's forward"):
                    outputs = model(*args, **kwargs)
            loss = checked_loss(loss_fn(outputs, (args, kwargs)), path)
            value = float(loss.detach())
            if not math.isfinite(value):
                return self._record(StepResult(value, scale, nonfinite="loss"))
            (scaler.scale(loss) if scaler is not None else loss).backward()
        if self.masters:
            for name, m in self.held.items():
                g = self.params[name].grad
                m.grad = None if g is None else g.detach().float()
        if before_update is not None:
            before_update()
        if scaler is not None:
            scaler.step(optimizer)
            scaler.update()
            skipped = scaler.get_scale() < scale  # _amp_update_scale_ backs off only on inf/NaN
        else:
            optimizer.step()
            skipped = False
        if self.masters:
            with torch.no_grad():
                for name, m in self.held.items():
                    self.params[name].copy_(m)
                    m.grad = None  # the measures read the low-precision gradients
        elif index == 0:
            self._find_own_masters()
        result = StepResult(value, scale, skipped)
        result.nonfinite = next((n for n, t in self.held.items() if not torch.isfinite(t).all()), None)
        return self._record(result)

    def _record(self, result: StepResult) -> StepResult:
        self.steps.append(result)
        if result.nonfinite is not None and self.stopped_at is None:
            self.stopped_at = len(self.steps) - 1
        return result

    def _find_own_masters(self) -> None:
        """An optimizer that keeps a float32 master copy of a low-precision parameter in its
        state (a state key naming "master", the parameter's shape) updates that copy: it is
        what the measures read, as for a plan's master weights."""
        for name, key in self.keys.items():
            if key.dtype == torch.float32:
                continue
            state = getattr(self.optimizer, "state", {}).get(key)
            for k, value in (state.items() if isinstance(state, dict) else ()):
                if "master" in str(k) and isinstance(value, torch.Tensor) and value.dtype == torch.float32 \
                        and value.shape == key.shape:
                    self.held[name] = value
                    break

    def drop_grads(self) -> None:
        """Free the gradients once measured (the next step sets them anew, as zero_grad does)."""
        for p in self.params.values():
            p.grad = None
        if self.masters:
            for m in self.held.values():
                m.grad = None

    def grads(self) -> dict:
        """name -> the gradient backward left on the parameter (its dtype, at the scale used)."""
        return {n: p.grad for n, p in self.params.items() if p.grad is not None}

    def state(self, name: str, key: str):
        """The optimizer's ``key`` state tensor (``exp_avg_sq``) of parameter ``name``, or None."""
        state = getattr(self.optimizer, "state", {}).get(self.keys[name])
        value = state.get(key) if isinstance(state, dict) else None
        return value if isinstance(value, torch.Tensor) and value.is_floating_point() else None

    def lr_of(self, name: str) -> float | None:
        key = self.keys[name]
        for group in getattr(self.optimizer, "param_groups", ()):
            if any(p is key for p in group.get("params", ())):
                lr = group.get("lr")
                return float(lr) if isinstance(lr, (int, float)) or isinstance(lr, torch.Tensor) else None
        return None

    def eps(self) -> float | None:
        groups = getattr(self.optimizer, "param_groups", ())
        eps = groups[0].get("eps") if groups else None
        return float(eps) if isinstance(eps, (int, float)) else None


def _device_of(model) -> torch.device:
    return next(model.parameters()).device


def checked_loss(loss, path: str):
    """The loss as a 0-dim float tensor that backward can start from, or a UsageError."""
    if not isinstance(loss, torch.Tensor):
        raise UsageError(f"{path}: the loss is a {type(loss).__name__}, not a scalar tensor "
                         "(get_loss must return one number to back-propagate)")
    if loss.numel() != 1 or not loss.is_floating_point():
        raise UsageError(f"{path}: the loss is not a scalar (shape {tuple(loss.shape)}, {loss.dtype}); "
                         "get_loss must return one floating-point number, e.g. its .mean()")
    if not loss.requires_grad:
        raise UsageError(f"{path}: the loss does not depend on any trainable parameter "
                         "(no gradient to train with)")
    return loss.reshape(())


def trainable(model, path: str) -> dict:
    params = {n: p for n, p in model.named_parameters() if p.requires_grad}
    if not params:
        raise UsageError(f"{path}: the model has no trainable parameters (requires_grad is False "
                         "everywhere): there is no training step to check")
    return params


def make_optimizer(factory, tensors: list, path: str):
    """``factory(tensors)``, checked to be an optimizer that steps exactly those tensors."""
    try:
        with user_code(path, "get_optimizer()"):
            optimizer = factory(tensors)
    except UsageError:
        raise
    except Exception as exc:  # noqa: BLE001 - the user's optimizer factory failing is bad input
        raise UsageError(f"{path}: get_optimizer(params) raised {describe(exc)}") from exc
    missing = [a for a in ("step", "zero_grad", "param_groups", "state") if not hasattr(optimizer, a)]
    if missing or not callable(getattr(optimizer, "step", None)):
        raise UsageError(f"{path}: get_optimizer(params) returned {type(optimizer).__name__}, not an "
                         f"optimizer (no {', '.join(missing) or 'callable step'}); return e.g. "
                         "torch.optim.AdamW(params, lr=...)")
    given = {id(t) for t in tensors}
    stepped = {id(p) for group in optimizer.param_groups for p in group.get("params", ())}
    if not stepped or not stepped <= given:
        raise UsageError(f"{path}: get_optimizer(params) returned an optimizer over other tensors than "
                         "the params it was given; build it on the params argument")
    return optimizer
