"""Default tolerances per dtype, and the verdict rule they feed.

An output is within tolerance when it is finite where the reference is, its cosine
similarity to the reference is at least ``cosine``, its largest absolute error is at most
``atol + rtol * max|reference|`` (when either is set) and its signal-to-noise ratio
``10 log10(sum ref^2 / sum (out - ref)^2)`` is at least ``snr_db`` (when set). The bound
is scaled by the output's largest magnitude, not element by element: a low-precision op's
error follows the magnitude of its inputs, so an element near zero in a large output
carries an error that an elementwise ``allclose`` would call a failure although nothing is
wrong. Intermediate results (where a variant first diverges) are held to the same bound
and SNR.

fp16 and bf16: fp16 keeps 11 significand bits (unit roundoff 4.9e-4), bf16 8 (3.9e-3), so
bf16's bounds are 5x fp16's.

FP8 (``--dtype float8``): E4M3 keeps 4 (3 stored): rounding one operand to it costs about
31 dB of SQNR, a GEMM of two such operands about 28.5 dB, so a max-abs bound made for bf16
fails a correct FP8 model. FP8 is judged by SNR instead, as torchao's own tests judge it
(pytorch/ao, ``compute_error`` = SQNR in dB):

- each FP8 GEMM against the same GEMM in fp32 on the same operands: ``gemm_snr_db`` 25
  (``test/float8/test_base.py``: ``assert sqnr >= 25.0`` for one FP8 GEMM, axiswise or
  tensorwise scales);
- each model output against the fp32 reference: ``snr_db`` 20 and cosine 0.995 (a whole
  MoE layer is held to 23 dB, ``test/prototype/moe_training/test_training.py``
  ``min_out_sqnr``, and a Llama-3-70B feed-forward block to 20 dB,
  ``test/float8/test_numerics_integration.py``). A model's output passes through more FP8
  GEMMs than either: clean transformer stacks measured here lose about 2 dB per doubling of
  depth (28.5 dB at 2 blocks, 25.7 at 12, 24.3 at 24, 22.2 at 48). An SNR of 20 dB means a
  cosine of at least 0.995 (1 - cos <= 10^(-SNR/10) / 2 for small errors): the cosine
  floor binds only when ``--snr`` is lowered.

No max-abs bound by default: ``--atol``/``--rtol`` add one (the one not given counts 0).

FP4 (``--dtype nvfp4|mxfp4``): E2M1 keeps 2 significant bits; a round trip costs about 20 dB
(NVFP4's 16-value blocks with E4M3 scales) or 19 dB (MXFP4's 32-value power-of-2 blocks), a
GEMM of two such operands about 17 and 15.5 dB. Judged by SNR, as torchao's FP4 tests judge:

- each FP4 GEMM against the same GEMM in fp32 on the same operands: ``gemm_snr_db`` 15 (NVFP4:
  ``test/prototype/moe_training/nvfp4_training/test_nvfp4_linear.py``, "Forward SQNR >= 15 dB",
  and ``test/prototype/mx_formats/test_inference_workflow.py``, NVFP4 Linear 15.0) and 12
  (MXFP4: ``test_inference_workflow.py``, ``SQNR_THRESHOLD = 12.0`` for FP4 elements);
- each model output against the fp32 reference: ``snr_db`` 10 (NVFP4) and 8 (MXFP4), cosine
  0.95 and 0.92 (what those imply: 1 - cos <= 10^(-SNR/10) / 2). A model's output passes
  through many FP4 GEMMs: clean transformer stacks measured here keep 25.4 dB at 2 blocks, 19.7
  at 8 and 14.8 at 32 under NVFP4 (about 2.7 dB per doubling of depth; MXFP4 1.5-2 dB lower),
  so torchao's one-Linear bar would fail a correct 32-block model; these bars pass a clean
  stack of about 100 blocks. Transformer Engine's own FP4 tolerance (``tests/pytorch/utils.py``,
  ``dtype_tols(kFloat4E2M1)``: rtol 0.25, atol 0.125, E2M1's epsilon) is of the same size as a
  10 dB SNR (a relative RMS error of 0.32) but elementwise.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from ..core.errors import UsageError


@dataclass(frozen=True)
class Tolerance:
    atol: float | None
    rtol: float | None
    cosine: float
    snr_db: float | None = None  # outputs and intermediates: minimum SNR in dB (None: not judged)
    gemm_snr_db: float | None = None  # FP8/FP4: each quantized GEMM against fp32 on the same operands

    def as_dict(self) -> dict:
        return asdict(self)

    def bound(self, ref_max: float) -> float | None:
        """The largest absolute error allowed, or None when no max-abs bound is set."""
        if self.atol is None and self.rtol is None:
            return None
        return (self.atol or 0.0) + (self.rtol or 0.0) * ref_max

    def exceeded(self, max_abs: float, ref_max: float, snr_db: float | None, cosine: float | None = None) -> bool:
        """Whether finite results with these errors leave the tolerance (``snr_db`` None: no
        error; ``cosine`` None: not judged, as for intermediates)."""
        bound = self.bound(ref_max)
        return ((bound is not None and max_abs > bound)
                or (self.snr_db is not None and snr_db is not None and snr_db < self.snr_db)
                or (cosine is not None and cosine < self.cosine))


DEFAULTS = {
    "float16": Tolerance(atol=1e-2, rtol=1e-2, cosine=0.999),
    "bfloat16": Tolerance(atol=5e-2, rtol=5e-2, cosine=0.995),
    "float8": Tolerance(atol=None, rtol=None, cosine=0.995, snr_db=20.0, gemm_snr_db=25.0),
    "nvfp4": Tolerance(atol=None, rtol=None, cosine=0.95, snr_db=10.0, gemm_snr_db=15.0),
    "mxfp4": Tolerance(atol=None, rtol=None, cosine=0.92, snr_db=8.0, gemm_snr_db=12.0),
}
#: the --dtype targets whose quantized GEMMs --gemm-snr judges
QUANTIZED_DTYPES = ("float8", "nvfp4", "mxfp4")


def tolerance_for(dtype: str, atol=None, rtol=None, cosine=None, snr=None, gemm_snr=None) -> Tolerance:
    """The dtype's defaults (``dtype`` as ``--dtype`` names it: float8 for an FP8 target) with
    the given values; a NaN, negative or infinite atol/rtol, a cosine outside [-1, 1], a
    non-finite SNR, or a GEMM SNR without FP8 is refused (NaN would pass every comparison)."""
    for flag, value in (("atol", atol), ("rtol", rtol)):
        if value is not None and not (math.isfinite(value) and value >= 0):
            raise UsageError(f"--{flag} {value}: must be a finite number >= 0")
    if cosine is not None and not -1.0 <= cosine <= 1.0:  # False for NaN
        raise UsageError(f"--cosine {cosine}: must be a number between -1 and 1")
    for flag, value in (("snr", snr), ("gemm-snr", gemm_snr)):
        if value is not None and not math.isfinite(value):
            raise UsageError(f"--{flag} {value}: must be a finite number of dB")
    if gemm_snr is not None and dtype not in QUANTIZED_DTYPES:
        raise UsageError("--gemm-snr judges FP8 GEMMs: it needs --dtype float8 (or FP4 GEMMs: nvfp4, mxfp4)")
    base = DEFAULTS[dtype]
    return Tolerance(atol=base.atol if atol is None else atol,
                     rtol=base.rtol if rtol is None else rtol,
                     cosine=base.cosine if cosine is None else cosine,
                     snr_db=base.snr_db if snr is None else snr,
                     gemm_snr_db=base.gemm_snr_db if gemm_snr is None else gemm_snr)
