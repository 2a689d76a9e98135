"""What the value-aware options ask for (--weights, --data, --batches, --headroom); torch-free."""
from __future__ import annotations

import math
import shlex
from dataclasses import dataclass


#: default headroom: a measured |x| above 65504 / 2 is one doubling away from inf in fp16
DEFAULT_HEADROOM = 2.0
#: the high percentile of |x| the range pass records
PERCENTILE = 0.999
#: elements the percentile is estimated from, per op and batch
SAMPLE = 1 << 20


@dataclass(frozen=True)
class ValueOptions:
    weights: str | None = None  # safetensors file / shard directory / state_dict file
    data: str | None = None  # "example", a function of the model file, or a batch file
    batches: int | None = None  # use at most this many calibration batches
    headroom: float = DEFAULT_HEADROOM  # warn when max |x| * headroom reaches the dtype's max

    def flags(self) -> str:
        """These options as command-line flags (" --weights w.safetensors --data example"), for
        the commands a report or a plan header suggests: a plan made from measured values is
        checked on the same weights and data."""
        given = [("--weights", self.weights), ("--data", self.data), ("--batches", self.batches)]
        return "".join(f" {flag} {shlex.quote(str(value))}" for flag, value in given if value is not None)

    @property
    def measure(self) -> bool:
        """Calibration data turns the range pass on; without it the scan stays static."""
        return self.data is not None


NO_VALUES = ValueOptions()


def call_key(module: str, op: str, counts: dict) -> str:
    """``module|op|k``: the k-th call (from 0) of ``op`` in ``module``; counts are updated.
    The range pass keys its statistics so, and the IR's nodes are numbered the same way."""
    k = counts.get((module, op), 0)
    counts[(module, op)] = k + 1
    return f"{module}|{op}|{k}"


def matched_calls(reference: list[str], target: list[str]) -> dict[str, str]:
    """{target key: reference key} for the calls the two runs both made, from their keys in
    call order. Code that branches on the dtype makes calls in one run only (a clamp under
    fp16, a cast that is a no-op in fp32); such a call is matched to nothing, and the calls
    after it are matched by position in the sequence, not by their ``k``, so that no run's
    value lands on another call. The runs' sequences of ``module|op`` are aligned (difflib's
    longest matching blocks); identical sequences, the usual case, cost one comparison."""
    if reference == target:
        return dict(zip(target, reference))
    from difflib import SequenceMatcher

    def calls(keys):
        return [key.rpartition("|")[0] for key in keys]

    matcher = SequenceMatcher(None, calls(reference), calls(target), autojunk=False)
    return {target[j + i]: reference[r + i] for r, j, size in matcher.get_matching_blocks()
            for i in range(size)}


def value_stats(values: np.ndarray, dtype: str) -> dict:
    """max |x|, a high percentile, min non-zero |x| and the shares of values below ``dtype``'s
    smallest normal (precision lost) and below half its smallest subnormal (they round to 0),
    and the shares of inf/NaN (``nonfinite``) and of NaN alone (``nan``). Both frontends'
    range passes summarise each result with it (numpy: no torch needed)."""
    import numpy as np  # here, not above: the CLI imports this module and `rules` needs no numpy

    from .numerics import LARGEST_FINITE, SMALLEST_NORMAL, SMALLEST_SUBNORMAL

    signed = np.asarray(values, dtype=np.float32).reshape(-1)
    a = np.abs(signed)
    n = a.size
    # the signed extremes, fills included (a -inf mask is a value the next op sees): the
    # measured interval that stands in for an unknown static value range
    nan = np.isnan(signed)
    known = signed[~nan]
    bad = {"nonfinite": float((~np.isfinite(signed)).sum()) / max(signed.size, 1),
           "nan": float(nan.sum()) / max(signed.size, 1)}
    interval = {"lo": float(known.min()), "hi": float(known.max())} if known.size else {"lo": None, "hi": None}
    # inf/NaN and +-finfo(float32).max are fills (masks written as finfo(dtype).min or -inf
    # follow the dtype: fp16's min under fp16), not values that grew: left out of the range;
    # so is +-finfo(dtype).max of the judged dtype (the fill the program that runs under it
    # writes: it fits, and the op that makes it inf is judged where that happens)
    a = a[(a < np.float32(LARGEST_FINITE["float32"])) & (a != np.float32(LARGEST_FINITE[dtype]))]
    if not a.size:
        return {"max_abs": 0.0, "p999": 0.0, "min_nonzero": None, "below_normal": 0.0,
                "flushed": 0.0, "numel": n, **interval, **bad}
    nonzero = a[a > 0]
    sample = a[:: max(1, a.size // SAMPLE)]
    k = max(1, math.ceil(PERCENTILE * sample.size))
    return {"max_abs": float(a.max()),
            "p999": float(np.partition(sample, k - 1)[k - 1]),
            "min_nonzero": float(nonzero.min()) if nonzero.size else None,
            "below_normal": float((nonzero < SMALLEST_NORMAL[dtype]).sum()) / n,
            "flushed": float((nonzero < SMALLEST_SUBNORMAL[dtype] / 2).sum()) / n,
            "numel": n, **interval, **bad}


def merge(old: dict | None, new: dict, batch: int) -> dict:
    """Running statistics over batches: the extremes kept with the batch that reached them,
    and the first batch with an inf/NaN (``nonfinite_batch``, None for none). Statistics
    with only some of value_stats's keys (the extremes the range pass keeps of the run under
    the target) merge what they have."""
    if old is None:
        return {**new, "batch": batch, **({"min_batch": batch} if "min_nonzero" in new else {}),
                "nonfinite_batch": batch if new.get("nonfinite") else None}
    out = dict(old)
    if out.get("nonfinite_batch") is None and new.get("nonfinite"):
        out["nonfinite_batch"] = batch
    if new["max_abs"] > old["max_abs"]:
        out["max_abs"], out["batch"] = new["max_abs"], batch
    if "p999" in new:
        out["p999"] = max(old["p999"], new["p999"])
    for key, pick in (("lo", min), ("hi", max)):
        both = [v for v in (old.get(key), new.get(key)) if v is not None]
        out[key] = pick(both) if both else None
    if "min_nonzero" in new:
        mins = [m for m in (old["min_nonzero"], new["min_nonzero"]) if m is not None]
        out["min_nonzero"] = min(mins) if mins else None
        if new["min_nonzero"] is not None and new["min_nonzero"] == out["min_nonzero"] != old["min_nonzero"]:
            out["min_batch"] = batch
    total = old["numel"] + new["numel"]
    for share in ("below_normal", "flushed", "nonfinite", "nan"):
        if share in new:
            out[share] = (old.get(share, 0.0) * old["numel"] + new[share] * new["numel"]) / max(total, 1)
    out["numel"] = total
    return out
