"""How much error E4M3 adds to each ``nn.Linear``'s input and weight under the FP8 recipes'
scales (--data under --dtype float8): sums and counts, never values.

Each operand is quantized to E4M3 and back exactly as ``check --dtype float8`` computes its
GEMMs (``runtime/pytorch/fp8.py``, where each recipe's scales are defined and cited): one
scale per tensor (tensorwise; ``delayed`` reads it), a power-of-2 scale per row along K
(rowwise; ``rowwise_with_gw_hp`` has the same forward), or a power-of-2 scale per 32 values
along K (mxfp8). Per call the hook keeps, per scheme: per input channel (column k of the
M x K input) the sum of squared errors (the channel's sum of squares and amax once); per row
(token, or weight output row) how many rows' relative RMS error reaches each level of
``LEVELS``; and how many non-zero values became 0. Memory is a few K-long vectors per
Linear, whatever the number of batches and tokens.
"""
from __future__ import annotations

import contextlib

import torch
from torch import nn

from ...runtime.pytorch.fp8 import MX_BLOCK, quantize_dequantize

#: the forward scalings counted (``delayed`` reads ``tensorwise``, ``rowwise_with_gw_hp`` ``rowwise``)
SCHEMES = ("tensorwise", "rowwise", "mxfp8")
#: the relative RMS errors per row counted: from 2^-6 to 1 in half binades. E4M3 rounds a
#: normal value with a relative error of at most 2^-4 (3 mantissa bits)
LEVELS = tuple(2.0 ** (e / 2) for e in range(-12, 1))


def round_trip(x: torch.Tensor, scheme: str) -> torch.Tensor | None:
    """A 2-D ``x`` (rows along K) as ``scheme``'s FP8 GEMM sees it, in fp32; None where the
    scheme cannot run it (mxfp8 with K not a multiple of 32)."""
    if scheme == "mxfp8" and x.shape[-1] % MX_BLOCK:
        return None
    return quantize_dequantize(x, scheme)


def _counts(x: torch.Tensor, per_channel: bool) -> dict:
    """One 2-D operand's sums and counts under every scheme (see the module docstring)."""
    sq = x * x
    row_sq = sq.sum(dim=1)
    live = row_sq > 0
    zeros = int((x == 0).sum())
    a = x.abs()
    out = {"nonzero": x.numel() - zeros, "rows": int(live.sum()), "error_sq": {}, "rows_above": {},
           "flushed": {}}
    if per_channel:
        out |= {"amax": a.amax(dim=0).double(), "sq": sq.sum(dim=0).double()}
    for scheme in SCHEMES:
        q = round_trip(x, scheme)
        if q is None:
            continue
        out["flushed"][scheme] = int((q == 0).sum()) - zeros  # a 0 stays 0: the others flushed
        err = q.sub_(x).square_()
        rel = (err.sum(dim=1)[live] / row_sq[live]).sqrt()
        out["rows_above"][scheme] = [int((rel >= level).sum()) for level in LEVELS]
        if per_channel:
            out["error_sq"][scheme] = err.sum(dim=0).double()
    return out


def input_counts(x: torch.Tensor) -> dict:
    """One call's sums and counts for an input (any leading dims, K last)."""
    return _counts(x.detach().reshape(-1, x.shape[-1]).float(), per_channel=True)


def weight_counts(w: torch.Tensor) -> dict:
    """A weight's (N x K) counts, as plain ints: its rows are the output rows."""
    return _counts(w.detach().float(), per_channel=False)


def _merge(old: dict | None, new: dict) -> dict:
    if old is None:
        return new
    schemes = old["rows_above"].keys() & new["rows_above"].keys()
    return {"nonzero": old["nonzero"] + new["nonzero"], "rows": old["rows"] + new["rows"],
            "amax": torch.maximum(old["amax"], new["amax"]), "sq": old["sq"] + new["sq"],
            "error_sq": {s: old["error_sq"][s] + new["error_sq"][s] for s in schemes},
            "rows_above": {s: [a + b for a, b in zip(old["rows_above"][s], new["rows_above"][s])]
                           for s in schemes},
            "flushed": {s: old["flushed"][s] + new["flushed"][s] for s in schemes}}


def as_record(counts: dict, weight: dict | None, calls: int) -> dict:
    """The counts as plain lists and numbers (what the IR's graph attributes hold)."""
    inp = {**counts, "amax": counts["amax"].tolist(), "sq": counts["sq"].tolist(),
           "error_sq": {s: v.tolist() for s, v in counts["error_sq"].items()}}
    return {"calls": calls, "levels": list(LEVELS), "input": inp, "weight": weight}


class LinearCounts:
    """The counts of every ``nn.Linear`` of ``model`` over the passes run inside ``counting()``
    (the fp32 reference forwards; a disabled one counts nothing: targets without FP8)."""

    def __init__(self, model: nn.Module, enabled: bool = True):
        self.model, self.enabled = model, enabled
        self.raw: dict = {}

    @contextlib.contextmanager
    def counting(self):
        """Every Linear call inside adds its input's counts (and, at its first call, its
        weight's). The counting runs outside any torch function or dispatch mode: the
        capture's recorder does not see it."""
        if not self.enabled:
            yield
            return
        handles = [m.register_forward_pre_hook(self._hook(name)) for name, m in self.model.named_modules()
                   if isinstance(m, nn.Linear)]
        try:
            yield
        finally:
            for h in handles:
                h.remove()

    def _hook(self, name):
        def hook(module, args):
            x = args[0] if args else None
            if not isinstance(x, torch.Tensor) or not x.is_floating_point() or x.device.type == "meta" \
                    or x.dim() == 0 or x.shape[-1] == 0:
                return
            with torch._C.DisableTorchFunction(), torch._C._DisableTorchDispatch(), torch.no_grad():
                entry = self.raw.setdefault(name, {"counts": None, "weight": None, "calls": 0})
                entry["counts"] = _merge(entry["counts"], input_counts(x))
                entry["calls"] += 1
                w = module.weight
                if entry["weight"] is None and w.device.type != "meta" and w.dim() == 2:
                    entry["weight"] = weight_counts(w)
        return hook

    def records(self) -> dict:
        """module name -> its counts as plain lists and ints (``as_record``)."""
        return {name: as_record(e["counts"], e["weight"], e["calls"]) for name, e in self.raw.items()}
