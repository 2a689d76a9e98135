"""Gradients (``check --grad``): error vs fp32, fp16 underflow, and the loss scale to use.

One backward per variant, from the same scalar loss: the model's own output when its first
output is a scalar, else the mean of each floating output times a fixed random tensor (so
every element gets a gradient of realistic, mean-reduced magnitude). The reference
backward records every parameter gradient and the gradient of every op output (the
activation gradients that AMP's backward carries in fp16) as a histogram of binary
exponents, from which the underflow share at any power-of-two loss scale follows:
in fp16 a value flushes to zero below 2^-24 and is subnormal (precision lost) below 2^-14.
The recommended initial scale is the largest power of two that keeps the largest gradient
below 65504; underflow only falls as the scale grows, so that is the one that minimises it.
When the gradients span more binades than fp16 has, no scale keeps them in range: the
report then warns (share lost at the best scale) instead of presenting the scale as safe.
Variants back-propagate at that scale (as GradScaler would) and are unscaled in fp32.
"""
from __future__ import annotations

import math
import weakref

import torch
from torch.overrides import TorchFunctionMode

from ...core.numerics import FP16_MAX
from ...runtime.pytorch.losses import floats as _floats
from ..metrics import report_number

ZERO_BELOW, SUBNORMAL_BELOW = -24, -14  # binary exponents
GRADSCALER_DEFAULT = 2.0 ** 16
#: share of gradient values subnormal or zero at the recommended scale above which it is no fix
UNDERFLOW_WARN = 0.01
_OFFSET, _BINS = 200, 400
SCALE_RANGE = (-24, 24)


class GradHistogram:
    """Binary-exponent histogram of gradient magnitudes (nonzero, finite values)."""

    def __init__(self):
        self.hist = torch.zeros(_BINS, dtype=torch.int64)
        self.max_abs = 0.0
        self.values = 0

    def add(self, g: torch.Tensor):
        g = g.detach().float().abs().flatten()
        g = g[(g > 0) & torch.isfinite(g)]
        if not g.numel():
            return
        exps = torch.floor(torch.log2(g)).to(torch.int64).clamp(-_OFFSET, _BINS - _OFFSET - 1)
        self.hist += torch.bincount((exps + _OFFSET).cpu(), minlength=_BINS)
        self.max_abs = max(self.max_abs, float(g.max()))
        self.values += g.numel()

    def share_below(self, exponent: int) -> float:
        """Share of values with |g| < 2^exponent."""
        if not self.values:
            return 0.0
        upto = max(0, min(_BINS, exponent + _OFFSET))
        return float(self.hist[:upto].sum()) / self.values

    def underflow(self, scale: float) -> dict:
        k = round(math.log2(scale))
        zero = self.share_below(ZERO_BELOW - k)
        return {"zero": report_number(zero), "subnormal": report_number(self.share_below(SUBNORMAL_BELOW - k) - zero)}

    def bins(self) -> dict:
        """The non-empty stretch of the histogram: ``count[i]`` values have
        2^log2[i] <= |g| < 2^(log2[i] + 1) (the HTML report plots it against fp16's range)."""
        nonzero = torch.nonzero(self.hist).flatten().tolist()
        if not nonzero:
            return {"log2": [], "count": []}
        lo, hi = nonzero[0], nonzero[-1] + 1
        return {"log2": list(range(lo - _OFFSET, hi - _OFFSET)), "count": self.hist[lo:hi].tolist()}

    def recommended_scale(self) -> float:
        if not self.max_abs:
            return GRADSCALER_DEFAULT
        k = math.floor(math.log2(FP16_MAX / self.max_abs))
        if self.max_abs * 2.0 ** k >= FP16_MAX:
            k -= 1
        return 2.0 ** max(SCALE_RANGE[0], min(SCALE_RANGE[1], k))


class ActivationGrads(TorchFunctionMode):
    """Feeds the gradient of every op output of the forward into a histogram: the largest
    gradient of a backward is often an intermediate one (attention scores), not a module's
    output or a parameter's."""

    def __init__(self, histogram: GradHistogram):
        super().__init__()
        self.histogram = histogram
        self._seen: dict = {}  # id -> weakref of a live tensor whose hook is set (a freed one's id is reused)

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if getattr(func, "__name__", None) != "__get__":
            for t in _floats(out):
                if t.requires_grad and id(t) not in self._seen:
                    self._seen[id(t)] = weakref.ref(t, lambda _, key=id(t): self._seen.pop(key, None))
                    t.register_hook(self._record)
        return out

    def _record(self, grad):
        self.histogram.add(grad)


def param_grads(model, scale: float = 1.0) -> dict:
    return {name: p.grad.detach().float() / scale for name, p in model.named_parameters()
            if p.grad is not None}


def loss_scale_report(histogram: GradHistogram, dtype: str) -> dict:
    """The fp16 loss-scale advice next to GradScaler's default; bf16 needs none."""
    fp16_scale = histogram.recommended_scale()
    report = {"values": histogram.values, "max_abs": report_number(histogram.max_abs),
              "histogram": histogram.bins(),
              "recommended_init_scale": fp16_scale if dtype == "float16" else 1.0,
              "gradscaler_default": GRADSCALER_DEFAULT,
              "overflow_at_default": histogram.max_abs * GRADSCALER_DEFAULT >= FP16_MAX,
              "underflow_fp16": {"scale_1": histogram.underflow(1.0),
                                 "recommended": histogram.underflow(fp16_scale),
                                 "gradscaler_default": histogram.underflow(GRADSCALER_DEFAULT)}}
    lost = histogram.underflow(fp16_scale)
    lost_share = lost["zero"] + lost["subnormal"]
    if dtype == "float16" and lost_share > UNDERFLOW_WARN:
        report["warning"] = (
            f"no float16 loss scale keeps these gradients in range: at the largest scale without "
            f"overflow (2^{round(math.log2(fp16_scale))}, largest gradient {histogram.max_abs:.3g}) "
            f"{100 * lost_share:.1f}% of the gradient values are subnormal or zero; train in "
            "bfloat16, or keep the regions that produce the largest gradients in float32")
    if dtype == "bfloat16":
        report["note"] = ("bfloat16 has float32's exponent range: no loss scaling needed "
                          "(the fp16 figures are for comparison)")
    return report


def compare_grads(ref: dict, got: dict) -> dict:
    """Gradient error of a variant vs the reference, over the parameters both have."""
    names = [n for n in ref if n in got and ref[n].shape == got[n].shape]
    if not names:
        return {"parameters": 0}
    r = torch.cat([ref[n].flatten().double() for n in names])
    g = torch.cat([got[n].flatten().to(r.device, torch.float64) for n in names])
    finite = torch.isfinite(g)
    bad = int((~finite).sum())
    diff = (g[finite] - r[finite])
    norm = float(r.norm())
    worst, worst_err = None, -1.0
    for n in names:
        rn, gn = ref[n].double(), got[n].to(ref[n].device).double()
        if not torch.isfinite(gn).all():
            err = math.inf
        else:
            denom = float(rn.norm())
            err = float((gn - rn).norm()) / denom if denom else float((gn - rn).norm())
        if err > worst_err:
            worst, worst_err = n, err
    if not diff.numel():
        return {"parameters": len(names), "nonfinite": bad, "max_abs": None, "rel_l2": None,
                "cosine": None, "worst_parameter": worst, "worst_rel_l2": None}
    cos = float((r[finite] * g[finite]).sum()) / (float(r[finite].norm()) * float(g[finite].norm()) or 1.0)
    return {"parameters": len(names), "nonfinite": bad,  # errors below: over the finite values
            "max_abs": report_number(float(diff.abs().max()) if diff.numel() else 0.0),
            "rel_l2": report_number(float(diff.norm()) / norm if norm else float(diff.norm())),
            "cosine": report_number(cos), "worst_parameter": worst,
            "worst_rel_l2": report_number(worst_err)}
