"""Compare a variant's outputs with the fp32 reference's, output by output.

Outputs are named arrays: torch tensors for a PyTorch model (the tensor leaves of whatever
its forward returns, named by their path: runtime.pytorch.execution.named_outputs), numpy
arrays for an ONNX model, which is checked without importing torch. The one
implementation serves both through the array API (``array_api_compat``): each array is
worked on by its own library, on its own device. Anything that is not a floating-point
array cannot be judged numerically: it is reported as incomparable with the reason, never
a crash. All arithmetic is in float64.
"""
from __future__ import annotations

import math

import numpy as np
from array_api_compat import array_namespace, device, is_array_api_obj, to_device

from ..core.errors import UsageError


def is_float_array(leaf) -> bool:
    """A torch tensor or numpy array of a floating-point dtype (float16, bfloat16, ...)."""
    return is_array_api_obj(leaf) and array_namespace(leaf).isdtype(leaf.dtype, "real floating")


def comparable(leaf) -> str | None:
    """Why a reference output cannot be compared numerically, or None if it can."""
    if not is_array_api_obj(leaf):
        return f"not a tensor ({type(leaf).__name__})"
    if not is_float_array(leaf):
        return f"a {str(leaf.dtype).replace('torch.', '')} tensor: only floating-point outputs are compared"
    if not math.prod(leaf.shape):
        return "an empty tensor"
    return None


def nonfinite_count(t) -> int:
    if not is_float_array(t):
        return 0
    xp = array_namespace(t)
    return int(xp.sum(~xp.isfinite(t)))


def _equal(ref, got) -> bool:
    """Same shape and the same values (what an incomparable output can still be judged by)."""
    if not is_array_api_obj(got) or tuple(ref.shape) != tuple(got.shape):
        return False
    xp = array_namespace(ref)
    return bool(xp.all(ref == to_device(got, device(ref))))


def report_number(x):
    """``x`` to 6 significant digits for the JSON report; None for None, nan and inf."""
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return None
    return float(f"{x:.6g}")


def compare(name: str, ref, got, tol) -> dict:
    """One output's error metrics and status: ok, exceeds_tolerance, nonfinite, incomparable."""
    why = comparable(ref)
    if why is not None:
        entry = {"name": name, "status": "incomparable", "reason": why}
        if is_array_api_obj(ref) and is_array_api_obj(got):
            entry["equal"] = _equal(ref, got)
        return entry
    if not is_array_api_obj(got):
        return {"name": name, "status": "exceeds_tolerance",
                "reason": f"this variant returned {type(got).__name__}, the reference a tensor"}
    if got.shape != ref.shape:
        return {"name": name, "status": "exceeds_tolerance",
                "reason": f"shape {tuple(got.shape)} differs from the reference's {tuple(ref.shape)}"}
    if not is_float_array(got):
        return {"name": name, "status": "exceeds_tolerance",
                "reason": f"this variant returned {got.dtype}, the reference a floating-point tensor"}
    sums = _chunked_sums(ref, to_device(got, device(ref)), tol.atol or 0.0)
    bad, max_abs, max_rel = sums["bad"], sums["max_abs"], sums["max_rel"]
    ref_max, ref_l1, diff_l1 = sums["ref_max"], sums["ref_l1"], sums["diff_l1"]
    mean_rel = diff_l1 / ref_l1 if ref_l1 else (0.0 if max_abs == 0 else math.inf)
    nr, na = math.sqrt(sums["signal"]), math.sqrt(sums["got_sq"])
    cosine = 1.0 if nr == 0 and na == 0 else (0.0 if nr == 0 or na == 0 else sums["dot"] / (nr * na))
    noise, signal = sums["noise"], sums["signal"]
    snr_db = 10 * math.log10(signal / noise) if noise and signal else None
    num = report_number
    entry = {"name": name, "shape": list(ref.shape), "max_abs": num(max_abs), "max_rel": num(max_rel),
             "mean_rel": num(mean_rel), "cosine": num(cosine), "snr_db": num(snr_db),
             "nonfinite": bad, "bound": num(tol.bound(ref_max))}
    if ref.ndim >= 2 and ref.shape[-1] >= 2:
        entry["top1_agreement"] = report_number(sums["agree"] / sums["rows"])
    if bad:
        entry["status"] = "nonfinite"
    elif tol.exceeded(max_abs, ref_max, snr_db, cosine):
        entry["status"] = "exceeds_tolerance"
    else:
        entry["status"] = "ok"
    return entry


CHUNK_ELEMENTS = 1 << 20  # float64 working set per step: 8 MiB a tensor, not 8 bytes x numel


@np.errstate(invalid="ignore", over="ignore")
def _chunked_sums(ref, got, atol) -> dict:
    """The sums and maxima ``compare`` needs, in float64, over whole rows (last dim) of
    ``CHUNK_ELEMENTS`` at a time: a GPT-2 logits tensor (26 M values) never has a float64
    copy. Error terms are over the elements where ``got`` is finite."""
    xp = array_namespace(ref, got)
    last = ref.shape[-1] if ref.ndim >= 2 and ref.shape[-1] else 1
    ref2, got2 = xp.reshape(ref, (-1, last)), xp.reshape(got, (-1, last))
    step = max(1, CHUNK_ELEMENTS // last)
    out = dict.fromkeys(("bad", "max_abs", "max_rel", "ref_max", "ref_l1", "diff_l1", "dot", "signal",
                         "got_sq", "noise", "agree"), 0.0)
    out["bad"], out["agree"], out["rows"] = 0, 0, ref2.shape[0]
    for start in range(0, ref2.shape[0], step):
        r = xp.astype(ref2[start:start + step], xp.float64)
        a = xp.astype(got2[start:start + step], xp.float64)
        finite = xp.isfinite(a)
        out["bad"] += int(xp.sum(~finite))
        out["ref_max"] = max(out["ref_max"], float(xp.max(xp.abs(r))))
        if last >= 2:
            same_top1 = xp.argmax(a, axis=-1) == xp.argmax(r, axis=-1)
            out["agree"] += int(xp.sum(same_top1 & xp.all(finite, axis=-1)))
        rf, af = r[finite], a[finite]
        if not rf.shape[0]:
            continue
        diff = xp.abs(af - rf)
        out["max_abs"] = max(out["max_abs"], float(xp.max(diff)))
        ref_abs = xp.abs(rf)
        significant = ref_abs > atol
        if xp.any(significant):
            out["max_rel"] = max(out["max_rel"], float(xp.max(diff[significant] / ref_abs[significant])))
        out["ref_l1"] += float(xp.sum(ref_abs))
        out["diff_l1"] += float(xp.sum(diff))
        out["dot"] += float(xp.sum(rf * af))
        out["signal"] += float(xp.sum(rf * rf))
        out["got_sq"] += float(xp.sum(af * af))
        out["noise"] += float(xp.sum(diff * diff))
    return out


def compare_all(ref_outputs, mine: dict, tol) -> list[dict]:
    """Every reference output (name, array) against the variant's output of the same name."""
    entries = []
    for name, ref in ref_outputs:
        if name not in mine:
            entries.append({"name": name, "status": "exceeds_tolerance",
                            "reason": "missing from this variant's outputs"})
        else:
            entries.append(compare(name, ref, mine[name], tol))
    return entries


STATUS_ORDER = ("nonfinite", "exceeds_tolerance", "ok")
#: how many intermediate values a check keeps from the reference run to find the first
#: divergence, per kind (modules, ops): 32 M values, 128 MiB in fp32 (torch and ONNX alike)
BUDGET_ELEMENTS = 1 << 25


def variant_status(entries) -> str:
    """The worst status among the comparable outputs (incomparable ones do not vote)."""
    statuses = {e["status"] for e in entries}
    return next((s for s in STATUS_ORDER if s in statuses), "ok")


def check_reference(path, outputs):
    """A UsageError unless the fp32 reference's ``outputs`` are finite floating-point tensors:
    a broken reference makes every comparison meaningless."""
    for name, leaf in outputs:
        if is_float_array(leaf):
            bad = nonfinite_count(leaf)
            if bad:
                raise UsageError(
                    f"{path}: the fp32 reference itself is broken: output {name} has {bad} "
                    f"non-finite value{'s' * (bad != 1)} without any low precision "
                    "(fix the model or its example inputs first)")
    if not any(is_float_array(leaf) and math.prod(leaf.shape) for _, leaf in outputs):
        kinds = ", ".join(f"{n}: {v.dtype if is_array_api_obj(v) else type(v).__name__}"
                          for n, v in outputs) or "nothing"
        raise UsageError(f"{path}: no output is a floating-point tensor ({kinds}): "
                         "the check has nothing to compare")


@np.errstate(invalid="ignore", over="ignore")  # inf - inf is a NaN to count, not to warn of
def divergence(refs: list, outs: list, tol) -> tuple[float, int, str | None] | None:
    """(relative error, values non-finite in the variant but finite in the reference,
    'nonfinite' | 'exceeds_tolerance' | None) of a variant's intermediate result (its
    tensors ``outs``) against the reference's ``refs``; None when they do not pair up.

    The one measure for a PyTorch op or module (torch tensors, detached) and an ONNX node
    (numpy arrays). Only what differs from the
    reference counts: an inf or NaN the reference has at the same place (a ``full(-inf)``
    mask) is no new non-finite value, and errors are measured where both are finite."""
    if len(refs) != len(outs):
        return None
    max_abs = ref_max = signal = noise = 0.0
    bad = 0
    for r, o in zip(refs, outs):
        if tuple(r.shape) != tuple(o.shape):
            return None
        xp = array_namespace(r)
        o = xp.astype(to_device(o, device(r)), r.dtype, copy=False)
        empty = not math.prod(r.shape)
        worst = 0.0 if empty else float(xp.max(xp.abs(o - r)))
        if math.isfinite(worst):  # both finite everywhere (nearly always): two passes, not ten
            max_abs = max(max_abs, worst)
            ref_max = max(ref_max, 0.0 if empty else float(xp.max(xp.abs(r))))
            if tol.snr_db is not None and not empty:  # an SNR bound (FP8): two more
                signal += float(xp.sum(r * r))
                noise += float(xp.sum((o - r) * (o - r)))
            continue
        ref_finite, out_finite = xp.isfinite(r), xp.isfinite(o)
        same = (o == r) | (xp.isnan(o) & xp.isnan(r))
        bad += int(xp.sum(~out_finite & ~same))
        both = ref_finite & out_finite
        if xp.any(both):
            max_abs = max(max_abs, float(xp.max(xp.abs(o[both] - r[both]))))
            if tol.snr_db is not None:
                signal += float(xp.sum(r[both] * r[both]))
                noise += float(xp.sum((o[both] - r[both]) * (o[both] - r[both])))
        if xp.any(ref_finite):
            ref_max = max(ref_max, float(xp.max(xp.abs(r[ref_finite]))))
    snr_db = 10 * math.log10(signal / noise) if signal and noise else None
    kind = "nonfinite" if bad else ("exceeds_tolerance" if tol.exceeded(max_abs, ref_max, snr_db) else None)
    return (max_abs / ref_max if ref_max else max_abs), bad, kind
