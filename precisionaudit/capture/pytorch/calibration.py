"""The range pass: real forwards over calibration batches, value statistics per op.

For each batch the run under the target policy (emulated CUDA autocast on CPU, or the pure
low-precision model; CUDA's kernel numerics emulated) runs with the capture's ``Recorder``
watching: it follows the target's control flow as the capture does, so its statistics are
the values the program that runs computes. Of it the pass keeps where each result lies (its
interval, max |x| and shares of inf/NaN: ``tensor_extremes``), what the rules read of it.
Code that branches on the dtype (``-1e4 if x.dtype == torch.float16 else -1e30``, T5's fp16
clamp, ``finfo(self.dtype).min`` masks) runs another program in fp32. The fp32 reference (the
values that would have existed without rounding: how far past the dtype's max an overflow
goes, which values round to 0; all of ``tensor_stats``) is recorded only on the batches whose
target run needs it (``needs_reference``): one that raised, made an inf/NaN, or came within
the headroom of its low dtype's max. Everything that reads the reference reads it there
only: PA301 where the target run is hot or inf, PA302 where its pole turned inf, the
value-range pass where the target run's interval is not finite. A healthy batch costs one
recorded forward instead of two. Under an FP8 target the fp32 forward still runs on every
batch, unrecorded on healthy ones, for the FP8 counts of each Linear's fp32 input
(``fp8_ranges``); under an FP4 target one more fp32 forward and backward runs on each batch
for each Linear's FP4 counts, Wgrad GEMM included (``fp4_ranges``). Both runs of a batch
start from the same random state, and freed memory is
reused rather than paged in again (``memory.reuse_freed_memory``).

Each user-level call that becomes an IR node is keyed by ``module|op|k`` (its k-th call of
that op in that module: the key the IR's nodes get in ``analysis/measured.py``) and
summarised when it finishes, so no activation outlives its call: memory is constant in the
number of batches. The reference's calls are matched to the target run's
(``core.values.matched_calls``): a call only one run makes gets that run's statistics alone.
Statistics merge across batches.
"""
from __future__ import annotations

import contextlib
import copy
from dataclasses import dataclass, field

import torch

from ...core.errors import CaptureError, UsageError
from ...core.numerics import LARGEST_FINITE, LOW_PRECISION_NAMES, dtype_name
from ...core.values import ValueOptions, call_key, matched_calls, merge
from ...runtime.data import pytorch_batches
from ...runtime.pytorch.cuda_autocast import autocast_policy
from ...runtime.pytorch.source import open_source
from ...runtime.pytorch.user_code import describe, user_code
from ...runtime.sources import LoadOptions
from .capture import is_significant
from .fp4_ranges import Fp4Counts
from .fp8_ranges import LinearCounts
from .memory import reuse_freed_memory
from .offload import checkpoint_stats, load_offloaded, needs_offload
from .recorder import AtenOp, Recorder, calls_the_model
from .tensor_stats import tensor_extremes, tensor_stats, weight_stats

@dataclass
class Measurement:
    calls: dict = field(default_factory=dict)  # key → the fp32 reference's merged statistics of that call
    target_calls: dict = field(default_factory=dict)  # key → merged extremes in the run under the target
    weights: dict = field(default_factory=dict)  # parameter name → tensor_stats.weight_stats
    batches: int = 0
    first_nonfinite: dict = field(default_factory=dict)  # batch → key of the target run's first inf/NaN
    low_runs: int = 0  # batches whose run under the target completed (one that raises: the reference alone)
    reference_runs: int = 0  # batches whose fp32 reference was recorded (needs_reference)
    unmatched: int = 0  # reference calls the target run did not make (branches on the dtype), all batches
    fp8: dict = field(default_factory=dict)  # nn.Linear name → E4M3 counts (FP8 targets; fp8_ranges)
    fp4: dict = field(default_factory=dict)  # nn.Linear name → FP4 counts (FP4 targets; fp4_ranges)


class _StatsRecorder(Recorder):
    """A Recorder that summarises each call's result as soon as the call is over. Of each
    aten op it keeps the name alone (what ``is_significant`` reads to tell the calls that
    become IR nodes), not its operands and producers: the range pass runs it on every op of
    every batch."""

    def __init__(self, model, on_call):
        super().__init__(model)
        self.on_call = on_call
        self.counts: dict = {}
        self._open = None  # (call, its latest output tensor)

    def record(self, func, args, kwargs, out):
        call = self.call_of(func)
        call.ops.append(len(self.ops))
        self.ops.append(AtenOp(len(self.ops), str(func), [], [], call.index))
        if self._open is not None and self._open[0] is not call:
            self.finish()
        # meta tensors are accelerate's offload hooks putting weights away, not results
        tensors = [o for o in torch.utils._pytree.tree_leaves(out)
                   if isinstance(o, torch.Tensor) and o.device.type != "meta"]
        self._open = (call, tensors[0] if tensors else (self._open or (None, None))[1])

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


def model_weight_stats(model, dtype: str) -> dict:
    """``weight_stats`` of every floating-point parameter, by name (PA303's input)."""
    return {name: weight_stats(p, dtype) for name, p in model.named_parameters()
            if p.is_floating_point() and p.numel()}


# --------------------------------------------------------------------------- the pass
def measure_file(name: str, target, load: LoadOptions, values: ValueOptions) -> Measurement:
    """Weight statistics (with --weights) and per-op ranges over the batches (with --data) of
    the model ``name`` names (runtime/pytorch/source.py)."""
    source = open_source(name, load)
    if needs_offload(values.weights):  # larger than half the free memory: accelerate
        if target.mode == "pure":
            raise UsageError(f"{values.weights}: larger than half the free memory; the range "
                             "pass offloads it to disk under autocast only (--mode autocast)")
        model = load_offloaded(source, values.weights)
        ranges = checkpoint_stats(values.weights, lambda t: weight_stats(t, target.dtype))
        return measure_model(model, source, target, values, ranges)
    model = source.build_loaded(values.weights)
    return measure_model(model, source, target, values)


def measure_model(model, source, target, values: ValueOptions, weight_ranges: dict | None = None) -> Measurement:
    """``measure_file`` on a model already built and loaded (``source``: where it came from,
    for its example inputs and data functions; ``weight_ranges``: the weights' statistics when
    they are not all in memory)."""
    path = source.name
    result = Measurement(weights=model_weight_stats(model, target.dtype) if weight_ranges is None else weight_ranges)
    # FP4 targets: each Linear's weight in FP4 now, its inputs and GEMMs on each batch (not offloaded)
    fp4 = Fp4Counts(model, getattr(target, "fp4", None) if weight_ranges is None else None)
    result.fp4 = fp4.records()
    if not values.measure:
        return result
    example = source.example_inputs("--data")
    low_model = _low_model(model, target)
    batches = pytorch_batches(values.data, source, example, values.batches)
    linears = LinearCounts(model, enabled=bool(getattr(target, "recipe", None)))
    # the data function and the forwards are the model's code
    with user_code(path, "forward"), reuse_freed_memory():
        for batch, (args, kwargs) in enumerate(batches):
            start = torch.get_rng_state()
            low = _target_pass(low_model, args, kwargs, target)
            record = low is None or needs_reference(low, values.headroom)
            reference = None
            if record or linears.enabled:
                with _random_state(start), linears.counting():
                    reference = _reference_pass(model, args, kwargs, target.dtype, record, path, batch)
            if fp4.enabled:
                with _random_state(start):
                    fp4.run(_fp32(args), _fp32(kwargs), 0, path, batch)
            merge_batch(result, reference, None if low is None else low.calls, batch)
            result.batches = batch + 1
    result.fp8, result.fp4 = linears.records(), fp4.records()
    return result


@dataclass
class TargetRun:
    """One batch's run under the target policy."""

    calls: list  # [(key, tensor_extremes)] in call order
    dtypes: set  # the target's dtype and the low dtypes its results were held in


def needs_reference(low: TargetRun, headroom: float) -> bool:
    """Whether a batch's fp32 reference is recorded: where its target run made an inf/NaN
    (PA301's overflow size, PA302's flushed values, the value-range pass's finite interval)
    or came within ``headroom`` of the max of the narrowest low dtype it held a value in
    (PA301's near case, and whether the value exists only in one program). Elsewhere nothing
    reads the reference."""
    limit = min(LARGEST_FINITE[d] for d in low.dtypes)
    return any(stats["nonfinite"] or stats["max_abs"] * headroom >= limit for _, stats in low.calls)


def merge_batch(result: Measurement, reference: list | None, low: list | None, batch: int) -> None:
    """One batch's [(key, statistics)] of both runs into ``result``: the target run's under
    its own keys (the IR's), the reference's under the key of the same call in the target run,
    and not at all where the target run made no such call. Without a target run (it raised)
    the reference's keys stand; without a reference (not needed) the target run's alone."""
    if reference is not None:
        result.reference_runs += 1
    if low is None:
        for key, stats in reference:
            result.calls[key] = merge(result.calls.get(key), stats, batch)
        return
    result.low_runs += 1
    for key, stats in low:
        result.target_calls[key] = merge(result.target_calls.get(key), stats, batch)
        if batch not in result.first_nonfinite and stats["nonfinite"]:
            result.first_nonfinite[batch] = key
    if reference is None:
        return
    by_key = dict(reference)
    pairs = matched_calls([key for key, _ in reference], [key for key, _ in low])
    for key, ref_key in pairs.items():
        result.calls[key] = merge(result.calls.get(key), by_key[ref_key], batch)
    result.unmatched += len(reference) - len(pairs)


@calls_the_model
def _reference_pass(model, args, kwargs, dtype: str, record: bool, path: str, batch: int) -> list | None:
    """The fp32 forward's [(key, statistics)] in call order, judged against the low ``dtype``;
    unrecorded (None) when not ``record`` (the FP8 counts' hooks alone watch it)."""
    from ...runtime.pytorch.execution import strict_fp32

    calls = []
    watch = _StatsRecorder(model, lambda key, t: calls.append((key, tensor_stats(t, dtype)))) if record \
        else contextlib.nullcontext()
    try:
        with torch.no_grad(), strict_fp32(), watch:
            model(*_fp32(args), **_fp32(kwargs))
    except Exception as exc:  # noqa: BLE001 - the model's own error, not ours
        raise CaptureError(f"{path}: the fp32 forward on calibration batch {batch} failed: "
                           f"{describe(exc)}") from exc
    return calls if record else None


@contextlib.contextmanager
def _random_state(start):
    """Run the reference from ``start``, the random state the batch's target run started from
    (a model that draws noise in its forward draws the same in both), then leave the state
    where the target run left it: the next batch draws the same whether a reference ran or not."""
    after = torch.get_rng_state()
    torch.set_rng_state(start)
    try:
        yield
    finally:
        torch.set_rng_state(after)


@calls_the_model
def _target_pass(model, args, kwargs, target) -> TargetRun | None:
    """The policy's own run (CUDA's kernels emulated on CPU), or None when the low-precision
    forward raises (the fp32 reference stands alone)."""
    from ...runtime.pytorch.execution import Runtime, numerics

    run = TargetRun([], {target.dtype})
    runtime = Runtime("cpu-emulated", "cuda", torch.device("cpu"))
    if target.mode == "pure":
        args, kwargs = _cast((args, kwargs), target.torch_dtype)

    def on_call(key, t):
        run.calls.append((key, tensor_extremes(t, target.dtype)))
        if dtype_name(t.dtype) in LOW_PRECISION_NAMES:
            run.dtypes.add(dtype_name(t.dtype))

    try:
        with torch.no_grad(), numerics(runtime), autocast_policy(target, runtime.name), _StatsRecorder(model, on_call):
            model(*args, **kwargs)
    except Exception:  # noqa: BLE001 - a low-precision forward that raises: the fp32 ranges stand
        return None
    return run


def _low_model(model, target):
    if target.mode != "pure":
        return model
    return copy.deepcopy(model).to(target.torch_dtype)


def _fp32(tree):
    return _cast(tree, torch.float32)


def _cast(tree, dtype):
    return torch.utils._pytree.tree_map_only(
        torch.Tensor, lambda t: t.to(dtype) if t.is_floating_point() else t, tree)
