"""What the watch is handed, unwrapped: the user's model, optimizer and loss scaler inside the
wrappers of DDP, FSDP/FSDP2, DeepSpeed, accelerate, Lightning and torch.compile.

Duck-typed on purpose: DeepSpeed (and often accelerate and Lightning) are not installed where
the watch is tested, and a wrapper is recognised by what it holds (``.module``, ``.optimizer``,
``.scaler``, ``.cur_scale``), not by importing its class.
"""
from __future__ import annotations

import torch

#: path components that wrappers insert into ``named_modules()`` names: FSDP1's flat wrapper,
#: activation checkpointing's wrapper, torch.compile's module
WRAPPER_PARTS = frozenset({"_fsdp_wrapped_module", "_checkpoint_wrapped_module", "_orig_mod"})
#: wrappers that hold the user's module in ``.module`` and are not needed to run it
PASS_THROUGH = frozenset({"DistributedDataParallel", "DataParallel"})


def is_deepspeed_engine(obj) -> bool:
    """A DeepSpeed engine (or a stand-in of the same shape): an nn.Module holding the user's
    module in ``.module`` and its optimizer in ``.optimizer``, stepping through ``.step()``
    and scaling through ``.backward()``."""
    return (isinstance(getattr(obj, "module", None), torch.nn.Module) and hasattr(obj, "optimizer")
            and callable(getattr(obj, "backward", None)) and callable(getattr(obj, "step", None)))


def runnable_model(model: torch.nn.Module) -> torch.nn.Module:
    """The module a replay calls: the user's own module inside DDP, DataParallel, a DeepSpeed
    engine and torch.compile, which add nothing a forward needs (DDP's gradient hooks must not
    run for a replay). FSDP stays: its wrapper gathers the sharded parameters."""
    seen = set()
    while id(model) not in seen:
        seen.add(id(model))
        if type(model).__name__ in PASS_THROUGH or is_deepspeed_engine(model):
            model = model.module
        elif type(model).__name__ == "OptimizedModule" and hasattr(model, "_orig_mod"):
            model = model._orig_mod
    return model


def clean_name(name: str) -> str:
    """'layers.0._fsdp_wrapped_module.attn' -> 'layers.0.attn'."""
    return ".".join(part for part in name.split(".") if part not in WRAPPER_PARTS)


def module_names(model: torch.nn.Module) -> dict:
    """{module: its name in the unwrapped model's ``named_modules()``}; a wrapper module and
    the module it wraps share the name, the inner one wins."""
    return {module: clean_name(name) for name, module in model.named_modules()}


def parameter_names(model: torch.nn.Module) -> dict:
    """{parameter: (its clean name, the clean name of the module that owns it)}."""
    found = {}
    for module_name, module in model.named_modules():
        for name, p in module.named_parameters(recurse=False):
            owner = clean_name(module_name)
            found[p] = (f"{owner}.{name}" if owner else name, owner)
    return found


def torch_optimizer(optimizer) -> torch.optim.Optimizer:
    """The torch optimizer inside accelerate's AcceleratedOptimizer, Lightning's
    LightningOptimizer and DeepSpeed's optimizer wrappers (each holds it in ``.optimizer`` or
    ``._optimizer``): its step hooks run exactly when a step is applied."""
    seen = set()
    while id(optimizer) not in seen:
        seen.add(id(optimizer))
        inner = getattr(optimizer, "optimizer", None) or getattr(optimizer, "_optimizer", None)
        if inner is None or not hasattr(inner, "param_groups"):
            break
        if isinstance(optimizer, torch.optim.Optimizer) and type(optimizer).__module__.startswith("torch."):
            break
        optimizer = inner
    if not isinstance(optimizer, torch.optim.Optimizer):
        raise TypeError(f"precisionaudit.watch: optimizer must be a torch.optim.Optimizer (or a wrapper "
                        f"holding one), not {type(optimizer).__name__}")
    return optimizer


def found_scaler(scaler, optimizer, model):
    """The loss scaler: the one given, else one a wrapper carries (accelerate's optimizer has
    ``.scaler``; a DeepSpeed engine's optimizer scales itself), else None."""
    if scaler is not None:
        return scaler
    for holder in (optimizer, getattr(model, "optimizer", None)):
        candidate = getattr(holder, "scaler", None)
        if candidate is not None and callable(getattr(candidate, "get_scale", None)):
            return candidate
    return None


def enabled(scaler) -> bool:
    return scaler is not None and (not hasattr(scaler, "is_enabled") or scaler.is_enabled())


class DeepSpeedScale:
    """A DeepSpeed engine's dynamic loss scale, read as GradScaler's: the engine's optimizer
    says whether the last step overflowed (``overflow``) and the scale in use
    (``cur_scale`` / ``loss_scale``); both are host values DeepSpeed has already synced."""

    def __init__(self, engine):
        self.engine = engine

    @property
    def optimizer(self):
        return self.engine.optimizer

    def get_scale(self) -> float:
        for holder in (self.optimizer, getattr(self.optimizer, "loss_scaler", None), self.engine):
            for key in ("cur_scale", "loss_scale"):
                value = getattr(holder, key, None)
                if isinstance(value, (int, float)) or isinstance(value, torch.Tensor):
                    return float(value)
        return 1.0

    def overflowed(self) -> bool | None:
        value = getattr(self.optimizer, "overflow", None)
        return None if value is None else bool(value)

    def is_enabled(self) -> bool:
        return any(hasattr(h, k) for h in (self.optimizer, self.engine) for k in ("cur_scale", "loss_scale"))


def compute_dtype(model: torch.nn.Module):
    """The dtype a sharding engine computes in, whatever the parameters are stored in: FSDP2's
    ``MixedPrecisionPolicy.param_dtype`` (the root's ``_get_fsdp_state()._mp_policy``), FSDP1's
    ``MixedPrecision.param_dtype``, a DeepSpeed engine's bf16/fp16 config; None where no
    engine sets one (autocast or the parameters' own dtype says)."""
    for module in model.modules():
        state = getattr(module, "_get_fsdp_state", None)
        if callable(state):
            policy = getattr(state(), "_mp_policy", None)
            if getattr(policy, "param_dtype", None) is not None:
                return policy.param_dtype
        policy = getattr(module, "mixed_precision", None)  # FSDP1's wrapper
        if type(module).__name__ == "FullyShardedDataParallel" and getattr(policy, "param_dtype", None) is not None:
            return policy.param_dtype
    if is_deepspeed_engine(model):
        for flag, dtype in (("bfloat16_enabled", torch.bfloat16), ("fp16_enabled", torch.float16)):
            enabled = getattr(model, flag, None)
            if callable(enabled) and enabled():
                return dtype
    return None
