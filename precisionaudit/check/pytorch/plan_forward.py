"""One forward of the planned model on fake tensors: does the plan make the model raise?

``plan`` runs it before writing a plan (a plan must never make a model raise), so that a
region that hands float32 values to a GEMM whose other operand is low precision (pure mode
has no autocast to reconcile them) is found on a CPU in about a second, at any model size.
Fake GEMMs take mixed operands where CUDA refuses them, so the run counts them
(``mixed_operands``): one the model without the plan does not have is the plan's doing.
"""
from __future__ import annotations

import torch
from torch._subclasses.fake_tensor import FakeTensorMode

from ...apply.pytorch import apply_plan, kept_in_fp32
from ...capture.pytorch.capture import fake_limitation, cast_floats, materialise_meta, to_dtype
from ...capture.pytorch.fakes import register_fakes
from ...runtime.pytorch.cuda_autocast import autocast_policy
from ...runtime.pytorch.emulation import mixed_operands
from ...runtime.pytorch.user_code import describe


def plan_forward_error_of(path: str, target, load, plan) -> str | None:
    """``plan_forward_error`` of the model ``path`` names (a model file, a Hugging Face
    directory, a ``module:callable``), opened with ``load``."""
    from ...runtime.pytorch.source import open_source

    return plan_forward_error(open_source(path, load), target, plan)


def plan_forward_error(source, target, plan) -> str | None:
    """What the planned model's forward does that the model's own does not: the error it
    raises, or the GEMM it hands two dtypes (CUDA raises "expected m1 and m2 to have the same
    dtype" there). None when it runs as the model does, and when fake tensors cannot run the
    model at all (``check`` judges the plan on real values then)."""
    register_fakes()
    try:
        with FakeTensorMode(allow_non_fake_inputs=True):
            model, _ = source.build_without_weights()
            materialise_meta(model)
            args, kwargs = source.example_inputs()
            if target.mode == "pure":
                args, kwargs = cast_floats((args, kwargs), target.torch_dtype)
                planned = to_dtype(model, target.torch_dtype, kept_in_fp32(model, plan.keep_fp32_modules))
            else:
                planned = model
            with apply_plan(planned, plan, warn=False, compilable=False):
                error, mixed = _forward(planned, args, kwargs, target)
            if error is None and not mixed:
                return None
            own_error, own_mixed = _forward(to_dtype(model, target.torch_dtype) if target.mode == "pure" else model,
                                            args, kwargs, target)
    except Exception:  # noqa: BLE001 - building the model or its inputs: the capture reported that already
        return None
    if error is not None:
        return None if own_error is not None or fake_limitation(error) else describe(error)
    new = sorted(set(mixed) - set(own_mixed))
    if not new:
        return None
    op = new[0]
    return (f"{op} is given {' and '.join(mixed[op])} operands, which CUDA refuses (expected both operands to "
            "have the same dtype)")


def _forward(model, args, kwargs, target):
    """(the exception the forward raised or None, {GEMM: the two dtypes it was given})."""
    device = "cpu-emulated" if target.device == "cuda" else "cpu"  # as the capture runs it
    with torch.no_grad(), mixed_operands(gemms=True) as mixed, autocast_policy(target, device):
        try:
            model(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - the caller compares it with the model's own
            return exc, dict(mixed)
    return None, dict(mixed)
