"""Default tolerances per dtype, and the verdict rule they feed.

An output is within tolerance when it is finite where the reference is, its cosine
similarity to the reference is at least ``cosine``, and its largest absolute error is at
most ``atol + rtol * max|reference|``. The bound is scaled by the output's largest
magnitude, not element by element: a low-precision op's error follows the magnitude of
its inputs, so an element near zero in a large output carries an error that an
elementwise ``allclose`` would call a failure although nothing is wrong.

The defaults leave room for the rounding of a healthy model: fp16 keeps 11 significand
bits (unit roundoff 4.9e-4), bf16 8 (3.9e-3), so bf16's bounds are 5x fp16's.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from ..core.errors import UsageError


@dataclass(frozen=True)
class Tolerance:
    atol: float
    rtol: float
    cosine: float

    def as_dict(self) -> dict:
        return asdict(self)

    def bound(self, ref_max: float) -> float:
        return self.atol + self.rtol * ref_max


DEFAULTS = {
    "float16": Tolerance(atol=1e-2, rtol=1e-2, cosine=0.999),
    "bfloat16": Tolerance(atol=5e-2, rtol=5e-2, cosine=0.995),
}


def tolerance_for(dtype: str, atol=None, rtol=None, cosine=None) -> Tolerance:
    """The dtype's defaults with the given values; a NaN, negative or infinite atol/rtol or a
    cosine outside [-1, 1] is refused (NaN would pass every comparison)."""
    for flag, value in (("atol", atol), ("rtol", rtol)):
        if value is not None and not (math.isfinite(value) and value >= 0):
            raise UsageError(f"--{flag} {value}: must be a finite number >= 0")
    if cosine is not None and not -1.0 <= cosine <= 1.0:  # False for NaN
        raise UsageError(f"--cosine {cosine}: must be a number between -1 and 1")
    base = DEFAULTS[dtype]
    return Tolerance(atol=base.atol if atol is None else atol,
                     rtol=base.rtol if rtol is None else rtol,
                     cosine=base.cosine if cosine is None else cosine)
