"""How much error E4M3 adds to each ``nn.Linear``'s input and weight under the FP8 recipes'
scales (--data under --dtype float8): sums and counts, never values.

Every recipe quantizes a GEMM operand as ``x * scale`` to E4M3 (max 448, smallest subnormal
2^-9, 3 mantissa bits), the scale set from an amax over a group of values:
- ``tensorwise`` (torchao's default; ``delayed`` here too, see below): one scale per tensor,
  ``448 / max(amax, 1e-12)`` (torchao ``float8_utils.amax_to_scale``);
- ``rowwise``: one scale per row along K (the input: per token; the weight: per output row),
  rounded down to a power of 2 (torchao's ROWWISE recipe sets ``round_scales_to_power_of_2``);
- ``rowwise_with_gw_hp``: the same rows, scales not rounded (the recipe leaves it False);
- ``mxfp8``: one power-of-2 (E8M0) scale per 32 values along K, ``2^-ceil(log2(amax / 448))``:
  torchao's MXFP8 training default, RCEIL (``to_mx``; cuBLAS "D block quantization"), which
  never saturates, where the OCP MX spec's FLOOR (``2^-(floor(log2 amax) - 8)``) may.
Transformer Engine's ``delayed`` recipe scales by the largest amax of a history of earlier
steps, never below the current one: the current amax's error is its lower bound.

Each operand is cast to ``torch.float8_e4m3fn`` (saturated, as torchao's
``to_fp8_saturated``) and back; per call the hook keeps, per scheme: per input channel
(column k of the M x K input) the sum of squared errors (the channel's sum of squares and
amax once); per row (token, or weight output row) how many rows' relative RMS error reaches
each level of ``LEVELS``; and how many non-zero values became 0. Memory is a few K-long
vectors per Linear, whatever the number of batches and tokens.
"""
from __future__ import annotations

import contextlib

import torch
from torch import nn

#: the schemes counted: every recipe's forward scaling (``delayed`` reads ``tensorwise``)
SCHEMES = ("tensorwise", "rowwise", "rowwise_with_gw_hp", "mxfp8")
E4M3_MAX = 448.0
#: the relative RMS errors per row counted: from 2^-6 to 1 in half binades. E4M3 rounds a
#: normal value with a relative error of at most 2^-4 (3 mantissa bits)
LEVELS = tuple(2.0 ** (e / 2) for e in range(-12, 1))
MX_BLOCK = 32
EPS = 1e-12  # torchao float8_utils.EPS


def scales(x: torch.Tensor, scheme: str, a: torch.Tensor | None = None,
           row_amax: torch.Tensor | None = None) -> torch.Tensor | None:
    """The multipliers ``scheme`` applies to a 2-D ``x`` (rows along K): a scalar
    (tensorwise), one per row (M x 1), or for mxfp8 one per 32-block (M x K/32 x 1, for
    ``x`` viewed as M x K/32 x 32); None where the scheme cannot run ``x`` (mxfp8 with K not
    a multiple of 32). amaxes are taken in fp32 and divided in fp64, as torchao does;
    ``a`` (|x|) and ``row_amax`` may be given when already computed."""
    a = x.abs() if a is None else a
    row_amax = a.amax(dim=-1, keepdim=True) if row_amax is None else row_amax
    if scheme == "tensorwise":
        return (E4M3_MAX / row_amax.max().double().clamp(min=EPS)).float()
    if scheme in ("rowwise", "rowwise_with_gw_hp"):
        s = (E4M3_MAX / row_amax.double().clamp(min=EPS)).float()
        return torch.exp2(torch.floor(torch.log2(s))) if scheme == "rowwise" else s
    if scheme == "mxfp8":
        m, k = x.shape
        if k % MX_BLOCK:
            return None
        blocks = a.reshape(m, k // MX_BLOCK, MX_BLOCK).amax(dim=-1, keepdim=True)
        exponent = torch.ceil(torch.log2(blocks.clamp(min=2.0 ** -127) / E4M3_MAX))
        return torch.exp2(-exponent.clamp(-127, 127))
    raise ValueError(f"unknown FP8 scaling scheme {scheme!r}")


def round_trip(x: torch.Tensor, scheme: str, **known) -> torch.Tensor | None:
    """A 2-D ``x`` cast to E4M3 under ``scheme``'s scales (saturated, as torchao's
    ``to_fp8_saturated``) and scaled back, in fp32; None where the scheme cannot run it.
    ``known``: ``scales``' precomputed ``a`` and ``row_amax``."""
    s = scales(x, scheme, **known)
    if s is None:
        return None
    shaped = x.reshape(x.shape[0], -1, MX_BLOCK) if scheme == "mxfp8" else x
    q = (shaped * s).clamp_(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn).float().div_(s)
    return q.reshape(x.shape)


def _counts(x: torch.Tensor, per_channel: bool) -> dict:
    """One 2-D operand's sums and counts under every scheme (see the module docstring)."""
    sq = x * x
    row_sq = sq.sum(dim=1)
    live = row_sq > 0
    zeros = int((x == 0).sum())
    a = x.abs()
    known = {"a": a, "row_amax": a.amax(dim=1, keepdim=True)}
    out = {"nonzero": x.numel() - zeros, "rows": int(live.sum()), "error_sq": {}, "rows_above": {},
           "flushed": {}}
    if per_channel:
        out |= {"amax": a.amax(dim=0).double(), "sq": sq.sum(dim=0).double()}
    for scheme in SCHEMES:
        q = round_trip(x, scheme, **known)
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
