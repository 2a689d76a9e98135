"""The range pass: real forwards over calibration batches, value statistics per op.

For each batch, one fp32 forward (the reference values) and one forward under the target
policy (emulated CUDA autocast on CPU, or the pure low-precision model) run with the
capture's ``Recorder`` watching. Each user-level call that becomes an IR node is keyed by
``module|op|k`` (its k-th call of that op in that module: the key the IR's nodes get in
``analysis/measured.py``) and summarised when it finishes, so no activation outlives its
call: memory is constant in the number of batches. Statistics merge across batches.
"""
from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field

import torch

from ...core.errors import CaptureError, UsageError
from ...core.numerics import LARGEST_FINITE, SMALLEST_SUBNORMAL, dtype_name
from ...core.values import ValueOptions, call_key, merge, value_stats
from ...runtime.pytorch.cuda_autocast import autocast_policy
from ..data import pytorch_batches
from .capture import is_significant
from .fp8_ranges import LinearCounts
from .model_file import call_user, entry_point, import_model_file, split_inputs
from .offload import checkpoint_stats, load_offloaded, needs_offload
from .recorder import Recorder, calls_the_model
from .user_code import describe, user_code
from .weights import load_model

@dataclass
class Measurement:
    calls: dict = field(default_factory=dict)  # key → merged statistics
    weights: dict = field(default_factory=dict)  # parameter name → statistics
    batches: int = 0
    first_nonfinite: dict = field(default_factory=dict)  # batch → key of the first inf/NaN
    low_runs: int = 0  # batches that got the low-precision run
    fp8: dict = field(default_factory=dict)  # nn.Linear name → E4M3 counts (FP8 targets; fp8_ranges)


def tensor_stats(t: torch.Tensor, dtype: torch.dtype) -> dict:
    """``value_stats`` of a tensor, judged against ``dtype``'s range."""
    return value_stats(t.detach().reshape(-1).float().cpu().numpy(), dtype_name(dtype))


#: aten ops for which an input of 0 is a pole → the position of that input
POLE_ARGS = {"div": 1, "reciprocal": 0, "rsqrt": 0, "log": 0, "log2": 0, "log10": 0}


class _StatsRecorder(Recorder):
    """A Recorder that summarises each call's result as soon as the call is over."""

    def __init__(self, model, on_call, flush_below: float | None = None):
        super().__init__(model, {**dict(model.named_buffers()), **dict(model.named_parameters())})
        self.on_call = on_call
        self.counts: dict = {}
        self._open = None  # (call, its latest output tensor)
        self.flush_below = flush_below  # watch the poles' inputs for values this small
        self.pole_flushes = False  # a divisor / log / rsqrt input would round to 0

    def record(self, func, args, kwargs, out):
        super().record(func, args, kwargs, out)
        if self.flush_below is not None and not self.pole_flushes:
            self._watch_pole(func, args)
        call = self.calls[self.ops[-1].call]
        if self._open is not None and self._open[0] is not call:
            self.finish()
        # meta tensors are accelerate's offload hooks putting weights away, not results
        tensors = [o for o in torch.utils._pytree.tree_leaves(out)
                   if isinstance(o, torch.Tensor) and o.device.type != "meta"]
        self._open = (call, tensors[0] if tensors else (self._open or (None, None))[1])

    def _watch_pole(self, func, args):
        position = POLE_ARGS.get(getattr(getattr(func, "overloadpacket", None), "__name__", None))
        if position is None or len(args) <= position or not isinstance(args[position], torch.Tensor):
            return
        with torch._C.DisableTorchFunction(), torch._C._DisableTorchDispatch():
            a = args[position].detach().abs()
            self.pole_flushes = bool(((a > 0) & (a < self.flush_below)).any())

    def finish(self):
        if self._open is None:
            return
        call, tensor = self._open
        self._open = None
        if not is_significant(call, self):
            return
        key = call_key(call.module, call.fn, self.counts)
        if isinstance(tensor, torch.Tensor) and tensor.is_floating_point():
            # the statistics are our own ops: neither the call tracker nor the tap sees them
            with torch._C.DisableTorchFunction(), torch._C._DisableTorchDispatch():
                self.on_call(key, tensor)

    def __exit__(self, *exc):
        result = super().__exit__(*exc)  # stop recording first: the last call's stats are ours
        self.finish()
        return result


def weight_stats(model, dtype: torch.dtype) -> dict:
    return {name: tensor_stats(p, dtype) for name, p in model.named_parameters()
            if p.is_floating_point() and p.numel()}


# --------------------------------------------------------------------------- the pass
def measure_file(path: str, target, entry: str, inputs_name: str, values: ValueOptions) -> Measurement:
    """Weight statistics (with --weights) and per-op ranges over the batches (with --data)."""
    module = import_model_file(path)
    if needs_offload(values.weights):  # larger than half the free memory: accelerate
        if target.mode == "pure":
            raise UsageError(f"{values.weights}: larger than half the free memory; the range "
                             "pass offloads it to disk under autocast only (--mode autocast)")
        model = load_offloaded(module, path, entry, values.weights)
        ranges = checkpoint_stats(values.weights, lambda t: tensor_stats(t, target.torch_dtype))
        return measure_model(model, module, path, target, inputs_name, values, ranges)
    model = load_model(module, path, entry, values.weights)
    return measure_model(model, module, path, target, inputs_name, values)


def measure_model(model, module, path: str, target, inputs_name: str, values: ValueOptions,
                  weight_ranges: dict | None = None) -> Measurement:
    """``measure_file`` on a model already built and loaded (``module``: its model file;
    ``weight_ranges``: the weights' statistics when they are not all in memory)."""
    dtype = target.torch_dtype
    result = Measurement(weights=weight_stats(model, dtype) if weight_ranges is None else weight_ranges)
    if not values.measure:
        return result
    make_inputs = entry_point(module, path, inputs_name, required=True)
    example = split_inputs(call_user(make_inputs, path, inputs_name), path, inputs_name)
    low_model = _low_model(model, target)
    batches = pytorch_batches(values.data, module, path, example, values.batches)
    linears = LinearCounts(model, enabled=bool(getattr(target, "recipe", None)))
    with user_code(path, "forward"):  # the data function and the forwards are the model's code
        for batch, (args, kwargs) in enumerate(batches):
            try:
                with linears.counting():
                    suspect = _reference_pass(model, args, kwargs, target, values.headroom, result, batch)
            except Exception as exc:  # noqa: BLE001 - the model's own error, not ours
                raise CaptureError(f"{path}: the fp32 forward on calibration batch {batch} failed: "
                                   f"{describe(exc)}") from exc
            if suspect:  # a batch whose values all fit cannot turn inf/NaN first in the low run
                _low_pass(low_model, args, kwargs, target, result, batch)
                result.low_runs += 1
            result.batches = batch + 1
    result.fp8 = linears.records()
    return result


@calls_the_model
def _reference_pass(model, args, kwargs, target, headroom, result, batch) -> bool:
    """The fp32 forward's statistics, merged into ``result``; whether the batch is suspect:
    a value within ``headroom`` of the low dtype's max (or non-finite), or a value that
    would round to 0 reaching a divisor, log, rsqrt or reciprocal. Only suspect batches
    get the (costly) low-precision run that finds the first inf/NaN."""
    dtype, name = target.torch_dtype, target.dtype
    suspect = []

    def on_call(key, tensor):
        stats = tensor_stats(tensor, dtype)
        result.calls[key] = merge(result.calls.get(key), stats, batch)
        if not math.isfinite(stats["max_abs"]) or stats["max_abs"] * headroom >= LARGEST_FINITE[name]:
            suspect.append(key)

    from ...runtime.pytorch.execution import strict_fp32

    recorder = _StatsRecorder(model, on_call, flush_below=SMALLEST_SUBNORMAL[name] / 2)
    with torch.no_grad(), strict_fp32(), recorder:
        model(*_fp32(args), **_fp32(kwargs))
    return bool(suspect) or recorder.pole_flushes


@calls_the_model
def _low_pass(model, args, kwargs, target, result, batch):
    """The policy's own run: where does the first inf/NaN appear?"""
    from ...runtime.pytorch.execution import Runtime, numerics

    def on_call(key, tensor):
        if batch not in result.first_nonfinite and not torch.isfinite(tensor).all():
            result.first_nonfinite[batch] = key

    runtime = Runtime("cpu-emulated", "cuda", torch.device("cpu"))
    if target.mode == "pure":
        args, kwargs = _cast((args, kwargs), target.torch_dtype)
    try:
        with torch.no_grad(), numerics(runtime), autocast_policy(target, runtime.name), \
                _StatsRecorder(model, on_call):
            model(*args, **kwargs)
    except Exception:  # noqa: BLE001 - a low-precision forward that raises: the fp32 ranges stand
        pass


def _low_model(model, target):
    if target.mode != "pure":
        return model
    return copy.deepcopy(model).to(target.torch_dtype)


def _fp32(tree):
    return _cast(tree, torch.float32)


def _cast(tree, dtype):
    return torch.utils._pytree.tree_map_only(
        torch.Tensor, lambda t: t.to(dtype) if t.is_floating_point() else t, tree)
