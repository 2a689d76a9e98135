"""``core.values.value_stats`` of a torch tensor: the same numbers at a fraction of the cost.

The range pass summarises the result of every op on every batch, and every weight once. With
numpy that cost about as much as the forwards (GPT-2 small: 30 s of a 120 s profiled pass, 7 s
of it in ``np.partition`` for the high percentile), most of it spent making full-size
temporaries (``abs``, masks, filtered copies), whose fresh pages cost more than the ops. Here
a tensor is read in chunks of about a million values into buffers kept between calls: per
chunk one ``aminmax`` (the interval and largest |x|; a value that is inf/NaN or a fill sends
the tensor to the path that filters them out first, as value_stats does), |x|'s bit patterns
(the sign bit cleared: one ``bitwise_and``, whose fp32 view is |x|), their least (the least
non-zero |x|, unless the chunk holds zeros), the counts below the smallest normal and below
half the smallest subnormal where the least is below them, and the sampled values at or above
a lower bound of the percentile (read beforehand from a sparser sample), of which the
percentile is a small ``topk``. Comparisons, counts and the selection run in numpy on views of the buffers: torch's
bool-producing kernels and ``nonzero`` are 5-10x slower on CPU. The result equals
``value_stats`` of the same values key for key (tests/test_tensor_stats.py); ``value_stats``
stays the definition, and the ONNX range pass's. ``tensor_extremes`` keeps where the values
lie (one ``aminmax``), all the range pass reads of the run under the target.
"""
from __future__ import annotations

import functools
import math
import struct
import threading

import numpy as np
import torch

from ...core.numerics import LARGEST_FINITE, SMALLEST_NORMAL, SMALLEST_SUBNORMAL
from ...core.values import PERCENTILE, SAMPLE

_FLOAT32_MAX = LARGEST_FINITE["float32"]
_CHUNK = 1 << 20  # values per chunk: 4 MiB in fp32
_BOUND_STRIDE = 64  # the percentile's lower bound is read from every 64th sampled value
_INT32_MAX = 0x7FFFFFFF


#: the keys of value_stats that say where the values lie (not what rounding them loses)
EXTREMES = ("max_abs", "numel", "lo", "hi", "nonfinite", "nan")


#: the keys of value_stats PA303 reads of a weight, the only reader of weight statistics:
#: where its values lie, its least non-zero |x| and the share that rounds to 0
WEIGHT_KEYS = (*EXTREMES, "min_nonzero", "flushed")


def _one_thread(fn):
    """Run ``fn`` on one thread: its ops are short, and waking a second thread for each cost
    more than it saved (5-10x slower on a loaded 2-core machine)."""
    @functools.wraps(fn)
    def wrapper(*args):
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            return fn(*args)
        finally:
            torch.set_num_threads(threads)
    return wrapper


@_one_thread
def tensor_stats(t: torch.Tensor, dtype: str) -> dict:
    """``value_stats`` (core/values.py) of ``t``'s values widened to fp32, judged against
    ``dtype`` ("float16", "bfloat16"): max |x|, the 99.9th percentile of |x|, min non-zero |x|,
    the shares below the smallest normal and below half the smallest subnormal, the shares of
    inf/NaN and the signed interval."""
    return _tensor_stats(t.detach().reshape(-1), dtype)


@_one_thread
def weight_stats(t: torch.Tensor, dtype: str) -> dict:
    """The ``WEIGHT_KEYS`` of ``tensor_stats``: without the percentile's sample and the count
    below the smallest normal, a third of the cost (every weight of the model is read once
    per range pass: GPT-2 small's 124 M values cost a quarter of its two plain forwards)."""
    stats = _tensor_stats(t.detach().reshape(-1), dtype, full=False)
    return {key: stats[key] for key in WEIGHT_KEYS}


@_one_thread
def tensor_extremes(t: torch.Tensor, dtype: str) -> dict:
    """The ``EXTREMES`` of ``tensor_stats``: the interval, max |x| and the shares of inf/NaN.
    Of a tensor without inf/NaN or fills (the usual case) that is one ``aminmax``, in its own
    dtype (no fp32 copy of an fp16 result)."""
    x = t.detach().reshape(-1)
    if x.numel():
        lo, hi = (float(v) for v in torch.aminmax(x))
        largest = max(-lo, hi)
        extremes = {"max_abs": largest, "numel": x.numel(), "lo": lo, "hi": hi, "nonfinite": 0.0, "nan": 0.0}
        if largest < min(_FLOAT32_MAX, LARGEST_FINITE[dtype]):
            return extremes
        if math.isfinite(largest):  # fills (a causal mask's finfo.min), no inf or NaN: max |x| without them
            a = x.abs()
            extremes["max_abs"] = float(a.masked_fill_((a >= _FLOAT32_MAX) | (a == LARGEST_FINITE[dtype]), 0).max())
            return extremes
    stats = _tensor_stats(x, dtype, full=False)  # inf or NaN
    return {key: stats[key] for key in EXTREMES}


def _tensor_stats(x: torch.Tensor, dtype: str, full: bool = True) -> dict:
    """``tensor_stats``; without ``full``, "p999" and "below_normal" are None."""
    n = x.numel()
    # value_stats leaves inf/NaN and the fills +-finfo(float32).max and +-finfo(dtype).max out
    # of |x|: a tensor whose largest |x| stays below both (a NaN does not) holds none of them
    stats = _stats(x, n, dtype, min(_FLOAT32_MAX, LARGEST_FINITE[dtype]), full) if n else None
    if stats is not None:
        return stats
    x = x.float()
    nan = torch.isnan(x)
    known = x[~nan]
    bad = {"lo": float(known.min()) if known.numel() else None,
           "hi": float(known.max()) if known.numel() else None,
           "nonfinite": int((~torch.isfinite(x)).sum()) / max(n, 1), "nan": int(nan.sum()) / max(n, 1)}
    a = x.abs()
    a = a[(a < _FLOAT32_MAX) & (a != LARGEST_FINITE[dtype])]
    if not a.numel():
        return {"max_abs": 0.0, "p999": 0.0, "min_nonzero": None, "below_normal": 0.0, "flushed": 0.0,
                "numel": n, **bad}
    return {**_stats(a, n, dtype, math.inf, full), **bad}


def _stats(x: torch.Tensor, n: int, dtype: str, limit: float, full: bool) -> dict | None:
    """The statistics of the 1-D ``x`` (signed, or |x| already) out of ``n`` values, read
    chunk by chunk into the thread's buffers (``_buffers``); None as soon as a value is not
    below ``limit`` in magnitude (or is NaN). Without ``full``, no percentile and no count
    below the smallest normal (None)."""
    step = max(1, x.numel() // SAMPLE)  # value_stats's percentile sample: every step-th value
    need = _above_percentile(-(-x.numel() // step))
    bound = _lower_bound(x[::step], need) if full else None
    chunk = min(x.numel(), step * max(1, _CHUNK // step))  # a multiple of step: each chunk's sample starts at 0
    values, bits, mask = _buffers(chunk)
    normal, half_subnormal = _bits(SMALLEST_NORMAL[dtype]), _bits(SMALLEST_SUBNORMAL[dtype] / 2)
    lo, hi, below, flushed, least, above = math.inf, -math.inf, 0, 0, _INT32_MAX, []
    for start in range(0, x.numel(), chunk):
        part = x[start:start + chunk]
        size = part.numel()
        w, m = bits[:size], mask[:size]
        if part.dtype != torch.float32:
            part = values[:size].copy_(part)  # widened
        low, high = (float(v) for v in torch.aminmax(part))
        if not max(-low, high) < limit:
            return None
        lo, hi = min(lo, low), max(hi, high)
        # w: |x|'s bit pattern (the sign bit cleared), in |x|'s order; as fp32 it is |x|
        torch.bitwise_and(part.view(torch.int32), _INT32_MAX, out=w)
        wn, smallest = w.numpy(), int(w.amin())
        zeros = size - np.count_nonzero(wn) if smallest == 0 else 0
        if 0 < zeros < size:  # the least non-zero: 0 wrapped above every other pattern
            smallest = int(torch.sub(w, 1, out=values[:size].view(torch.int32)).bitwise_and_(_INT32_MAX).amin()) + 1
        if smallest:
            least = min(least, smallest)
        # "0 < |x| < t" is "w < pattern(t)" less the zeros; none below when the least is not
        if full and 0 < smallest < normal:
            below += np.count_nonzero(np.less(wn, normal, out=m)) - zeros
        if 0 < smallest < half_subnormal:
            flushed += np.count_nonzero(np.less(wn, half_subnormal, out=m)) - zeros
        if full:
            sampled = w.view(torch.float32).numpy()[::step]
            above.append(np.compress(np.greater_equal(sampled, bound, out=m[:sampled.size]), sampled))
    return {"max_abs": max(-lo, hi), "p999": _percentile(x, step, need, above) if full else None,
            "min_nonzero": None if least == _INT32_MAX else _float(least),
            "below_normal": below / n if full else None, "flushed": flushed / n, "numel": n,
            "lo": lo, "hi": hi, "nonfinite": 0.0, "nan": 0.0}


def _percentile(x: torch.Tensor, step: int, need: int, above: list) -> float:
    """value_stats's percentile of |x| from the sampled values at or above the lower bound."""
    above = torch.from_numpy(np.concatenate(above))
    if above.numel() < need:  # the bound was above the percentile: read the whole sample
        above = x[::step].float().abs()
    return float(torch.topk(above, need).values[-1])


_LOCAL = threading.local()


def _buffers(size: int):
    """An fp32 and an int32 tensor and a numpy bool array of at least ``size`` values, kept by
    the thread between calls: a fresh multi-MiB temporary per op and call costs more in page
    faults than the op itself."""
    held = getattr(_LOCAL, "buffers", None)
    if held is None or held[0].numel() < size:
        held = _LOCAL.buffers = (torch.empty(size), torch.empty(size, dtype=torch.int32), np.empty(size, dtype=bool))
    return held


def _bits(value: float) -> int:
    """The int32 pattern of ``value`` as an fp32."""
    return struct.unpack("<i", struct.pack("<f", value))[0]


def _float(pattern: int) -> float:
    return struct.unpack("<f", struct.pack("<i", pattern))[0]


def _above_percentile(size: int) -> int:
    """How many of ``size`` sampled values lie at or above value_stats's percentile (the k-th
    smallest, k = ceil(PERCENTILE * size))."""
    return size - max(1, math.ceil(PERCENTILE * size)) + 1


def _lower_bound(sample: torch.Tensor, need: int) -> float:
    """A value that (almost always) at least ``need`` of ``sample``'s |x| reach: an order
    statistic of every ``_BOUND_STRIDE``-th one, four times lower in rank than the percentile's.
    0 (every value) for small samples."""
    if sample.numel() <= 16 * _BOUND_STRIDE:
        return 0.0
    sparse = sample[::_BOUND_STRIDE]
    rank = min(sparse.numel(), math.ceil(4 * need * sparse.numel() / sample.numel()))
    return float(torch.topk(sparse.float().abs(), rank).values[-1])
