"""Compare a variant's outputs with the fp32 reference's, output by output.

Outputs are the tensor leaves of whatever the forward returns (tuples, dicts, Hugging
Face ``ModelOutput``s), named by their path ("0", "logits", "1.hidden"). Anything that is
not a floating-point tensor cannot be judged numerically: it is reported as incomparable
with the reason, never a crash. All arithmetic is in float64.
"""
from __future__ import annotations

import math

import torch
from torch.utils import _pytree as pytree

from ..core.errors import UsageError


def _key_name(key) -> str:
    for attr in ("idx", "key", "name"):
        if hasattr(key, attr):
            return str(getattr(key, attr))
    return str(key)


def named_outputs(out) -> list[tuple[str, object]]:
    """[(name, leaf)] of a forward's result; a bare tensor is output "0"."""
    leaves, _ = pytree.tree_flatten_with_path(out)
    if len(leaves) == 1 and not leaves[0][0]:
        return [("0", leaves[0][1])]
    return [(".".join(_key_name(k) for k in path) or "0", leaf) for path, leaf in leaves]


def comparable(leaf) -> str | None:
    """Why a reference output cannot be compared numerically, or None if it can."""
    if not isinstance(leaf, torch.Tensor):
        return f"not a tensor ({type(leaf).__name__})"
    if not leaf.is_floating_point():
        return f"a {str(leaf.dtype).replace('torch.', '')} tensor: only floating-point outputs are compared"
    if leaf.numel() == 0:
        return "an empty tensor"
    return None


def nonfinite_count(t: torch.Tensor) -> int:
    return int((~torch.isfinite(t)).sum()) if t.is_floating_point() else 0


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
        if isinstance(ref, torch.Tensor) and isinstance(got, torch.Tensor):
            entry["equal"] = bool(ref.shape == got.shape and torch.equal(ref.cpu(), got.cpu()))
        return entry
    if not isinstance(got, torch.Tensor):
        return {"name": name, "status": "exceeds_tolerance",
                "reason": f"this variant returned {type(got).__name__}, the reference a tensor"}
    if got.shape != ref.shape:
        return {"name": name, "status": "exceeds_tolerance",
                "reason": f"shape {tuple(got.shape)} differs from the reference's {tuple(ref.shape)}"}
    if not got.is_floating_point():
        return {"name": name, "status": "exceeds_tolerance",
                "reason": f"this variant returned {got.dtype}, the reference a floating-point tensor"}
    sums = _chunked_sums(ref.detach(), got.detach().to(ref.device), tol.atol)
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
    if ref.dim() >= 2 and ref.shape[-1] >= 2:
        entry["top1_agreement"] = report_number(sums["agree"] / sums["rows"])
    if bad:
        entry["status"] = "nonfinite"
    elif max_abs > tol.bound(ref_max) or cosine < tol.cosine:
        entry["status"] = "exceeds_tolerance"
    else:
        entry["status"] = "ok"
    return entry


CHUNK_ELEMENTS = 1 << 20  # float64 working set per step: 8 MiB a tensor, not 8 bytes x numel


def _chunked_sums(ref, got, atol) -> dict:
    """The sums and maxima ``compare`` needs, in float64, over whole rows (last dim) of
    ``CHUNK_ELEMENTS`` at a time: a GPT-2 logits tensor (26 M values) never has a float64
    copy. Error terms are over the elements where ``got`` is finite."""
    last = ref.shape[-1] if ref.dim() >= 2 and ref.shape[-1] else 1
    ref2, got2 = ref.reshape(-1, last), got.reshape(-1, last)
    step = max(1, CHUNK_ELEMENTS // last)
    out = dict.fromkeys(("bad", "max_abs", "max_rel", "ref_max", "ref_l1", "diff_l1", "dot", "signal",
                         "got_sq", "noise", "agree"), 0.0)
    out["bad"], out["agree"], out["rows"] = 0, 0, ref2.shape[0]
    for start in range(0, ref2.shape[0], step):
        r = ref2[start:start + step].to(torch.float64)
        a = got2[start:start + step].to(torch.float64)
        finite = torch.isfinite(a)
        out["bad"] += int((~finite).sum())
        out["ref_max"] = max(out["ref_max"], float(r.abs().max()))
        if last >= 2:
            out["agree"] += int(((a.argmax(dim=-1) == r.argmax(dim=-1)) & finite.all(dim=-1)).sum())
        rf, af = r[finite], a[finite]
        if not rf.numel():
            continue
        diff = (af - rf).abs()
        out["max_abs"] = max(out["max_abs"], float(diff.max()))
        ref_abs = rf.abs()
        significant = ref_abs > atol
        if significant.any():
            out["max_rel"] = max(out["max_rel"], float((diff[significant] / ref_abs[significant]).max()))
        out["ref_l1"] += float(ref_abs.sum())
        out["diff_l1"] += float(diff.sum())
        out["dot"] += float((rf * af).sum())
        out["signal"] += float((rf * rf).sum())
        out["got_sq"] += float((af * af).sum())
        out["noise"] += float((diff * diff).sum())
    return out


def compare_all(ref_outputs, got, tol) -> list[dict]:
    """Every reference output against the variant's output of the same name."""
    mine = dict(named_outputs(got))
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
        if isinstance(leaf, torch.Tensor) and leaf.is_floating_point():
            bad = nonfinite_count(leaf)
            if bad:
                raise UsageError(
                    f"{path}: the fp32 reference itself is broken: output {name} has {bad} "
                    f"non-finite value{'s' * (bad != 1)} without any low precision "
                    "(fix the model or its example inputs first)")
    if not any(isinstance(leaf, torch.Tensor) and leaf.is_floating_point() and leaf.numel()
               for _, leaf in outputs):
        kinds = ", ".join(f"{n}: {type(v).__name__ if not isinstance(v, torch.Tensor) else v.dtype}"
                          for n, v in outputs) or "nothing"
        raise UsageError(f"{path}: no output is a floating-point tensor ({kinds}): "
                         "the check has nothing to compare")


def divergence(refs: list, outs: list, tol) -> tuple[float, int, str | None] | None:
    """(relative error, values non-finite in the variant but finite in the reference,
    'nonfinite' | 'exceeds_tolerance' | None) of a variant's intermediate result (its
    tensors ``outs``) against the reference's ``refs``; None when they do not pair up.

    The one measure for a PyTorch op or module and an ONNX node. Only what differs from the
    reference counts: an inf or NaN the reference has at the same place (a ``full(-inf)``
    mask) is no new non-finite value, and errors are measured where both are finite."""
    if len(refs) != len(outs):
        return None
    max_abs = ref_max = 0.0
    bad = 0
    with torch.no_grad():
        for r, o in zip(refs, outs):
            if r.shape != o.shape:
                return None
            o = o.detach().to(r.device, r.dtype)
            worst = float((o - r).abs().max()) if r.numel() else 0.0
            if math.isfinite(worst):  # both finite everywhere (nearly always): two passes, not ten
                max_abs = max(max_abs, worst)
                ref_max = max(ref_max, float(r.abs().max()) if r.numel() else 0.0)
                continue
            ref_finite, out_finite = torch.isfinite(r), torch.isfinite(o)
            same = (o == r) | (torch.isnan(o) & torch.isnan(r))
            bad += int((~out_finite & ~same).sum())
            both = ref_finite & out_finite
            if both.any():
                max_abs = max(max_abs, float((o[both] - r[both]).abs().max()))
            if ref_finite.any():
                ref_max = max(ref_max, float(r[ref_finite].abs().max()))
    kind = "nonfinite" if bad else ("exceeds_tolerance" if max_abs > tol.bound(ref_max) else None)
    return (max_abs / ref_max if ref_max else max_abs), bad, kind

