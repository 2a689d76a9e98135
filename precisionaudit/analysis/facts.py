"""The facts analysis passes write on IR nodes: one typed record per pass, under its own key.

As torch.fx's ShapeProp writes one ``TensorMetadata`` into ``node.meta["tensor_meta"]``,
each pass writes exactly one record into a node's attributes (``node["norm"] =
NormFacts(...)``). The classes below ARE the list of facts a rule can read: a check reads
``node["norm"].pattern``, a rule pack's YAML matches ``where: {"norm.pattern": "mean of
squares"}``.

Convention: a pass that judges every node (precision, kernel, constant, range) writes its
record on every node; a pass that looks for a pattern writes its record only on the nodes
where it found one, and nothing elsewhere (the key is absent, never None). ``fact(node,
"norm.pattern")`` reads a field and gives None where the record is absent.

The flat keys the passes wrote before these records (``norm_pattern``, ``low_precision``,
...) stay readable through ``ALIASES``: rule packs' ``where`` and message placeholders
name them.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields


@dataclass(frozen=True)
class PrecisionFacts:
    """Why the op computes in the dtype it does (analysis/dtypes.py)."""

    low_precision: bool  # it computes in fp16/bf16
    why: str  # "autocast: lower_precision_fp list", "explicit cast", "type promotion", ...


@dataclass(frozen=True)
class KernelFacts:
    """What the op's PyTorch kernel accumulates in (analysis/kernels.py)."""

    accumulate_dtype: str | None  # None: the kernel table does not know it (judge compute_dtype)
    source: str | None  # the PyTorch source that shows it, None for an unknown kernel
    computes_statistics: bool  # False for eval-mode batch norm (it uses running statistics)


@dataclass(frozen=True)
class Constant:
    """One Python constant mixed into the op's tensor, and what it becomes in its dtype."""

    value: float | int
    dtype: str  # the dtype it meets
    stored: float  # the value that dtype stores
    status: str  # "ok" | "overflow" | "underflow" | "subnormal"
    aten: str  # the aten op that read it


@dataclass(frozen=True)
class ConstantFacts:
    """The constants the op mixes into its tensor (analysis/constants.py); empty for none."""

    uses: tuple[Constant, ...] = ()

    @property
    def as_dicts(self) -> list[dict]:
        """The constants as the flat ``constants`` key held them (a list of dicts)."""
        return [asdict(c) for c in self.uses]


@dataclass(frozen=True)
class ReductionFacts:
    """How many elements a reduction folds into each output (analysis/reductions.py)."""

    extent: int | None  # None where the shapes do not tell it


@dataclass(frozen=True)
class AttentionFacts:
    """A matmul -> (scale, mask) -> softmax chain (analysis/attention.py). On the logits GEMM:
    the softmax it feeds and its scales; on the softmax: the GEMM that makes its logits."""

    feeds_softmax: str | None = None  # the softmax node this GEMM's logits go to
    scale_before: float | None = None  # product of the scales before the store (1.0: none; None: unknown)
    scale_after: float | None = None  # product of the scales after it
    scaled_before: bool | None = None  # a factor other than 1 is applied before the store
    scaled_after: bool | None = None
    head_dim: int | None = None  # the GEMM's contraction extent, None where shapes do not tell it
    logits_from: str | None = None  # (on the softmax) the GEMM that makes its logits


@dataclass(frozen=True)
class NormFacts:
    """A hand-written normalisation (analysis/norms.py)."""

    pattern: str  # "mean of squares" | "rsqrt of a variance"
    square_node: str | None = None  # the x * x / x ** 2 a mean of squares reads
    square_dtype: str | None = None  # the dtype that square computes in


@dataclass(frozen=True)
class SoftmaxFacts:
    """Softmax probabilities and the first op for which a 0 among them is fatal (analysis/softmax.py)."""

    kind: str  # "softmax" | "hand-written softmax"
    probs_consumer: str | None  # the log / reciprocal / divisor use, None for none


@dataclass(frozen=True)
class RnnFacts:
    """The state a recurrence carries (analysis/rnn.py)."""

    state_dtype: str | None  # the dtype it carries the state in
    steps: int | None = None  # over how many steps, None where the shapes do not tell it


@dataclass(frozen=True)
class IntegerFacts:
    """Integer-valued float data (positions, counts, indices) (analysis/integers.py)."""

    largest: int  # the largest integer value it can hold


@dataclass(frozen=True)
class CalibrationFacts:
    """What the op produced over the calibration batches (--data; analysis/measured.py), in
    the two runs of the range pass. ``target``: the run under the target policy (low-precision
    tensors, CUDA's kernel numerics emulated), which follows the target's control flow: the
    values the program that runs computes. ``stats``: the fp32 reference, the values that
    would exist without rounding (how far past the dtype's max an overflow goes), recorded on
    the batches where the target run makes an inf/NaN or nears the dtype's max (PyTorch: the
    only places it is read). Code that branches on the dtype runs a different program in each;
    a call only the target's program makes has no reference statistics."""

    stats: dict | None  # the fp32 reference's core.values.value_stats merged over batches; None: no such call in fp32, or no reference recorded
    key: str  # the call key (PyTorch) or node name (ONNX) the statistics were recorded under
    nonfinite_first: bool  # the run under the target saw its first inf/NaN here
    target: dict | None = None  # the run under the target's interval, max_abs and inf/NaN shares; None: no such run (ONNX, or it raised)

    @property
    def summary(self) -> dict:
        """The statistics as the flat ``measured`` key held them (the reference's), with the
        target run's under ``target``."""
        return {**(self.stats or {}), "key": self.key, "nonfinite_first": self.nonfinite_first,
                "target": self.target}

    def interval(self):
        """(lo, hi) the program that runs reached (fills such as -inf masks included), or None:
        the target run's; the reference's where the target run went inf (an overflow: the
        reference holds the value the rounding lost) or did not measure the op."""
        target, reference = _interval(self.target), _interval(self.stats)
        if target is None or (reference is not None and not all(map(math.isfinite, target))):
            return reference
        return target


def _interval(stats):
    lo, hi = (stats or {}).get("lo"), (stats or {}).get("hi")
    return None if lo is None or hi is None else (lo, hi)


@dataclass(frozen=True)
class RangeFacts:
    """The static interval of the op's output (analysis/ranges.py)."""

    value_range: tuple | None  # (lo, hi); None: nothing bounds it
    source: str | None  # "static" | "measured" (a calibration interval stood in), None with no range
    l2_bound: float | None  # a bound on the L2 norm of the output's rows (normalised vectors)


@dataclass(frozen=True)
class WorkFacts:
    """The multiply-adds of a GEMM, convolution or attention call (analysis/work.py)."""

    macs: int  # this call's multiply-adds
    site_share: float  # its site's (module class, op, shapes) share of the model's total


@dataclass(frozen=True)
class PhaseFacts:
    """A low-precision store on the chain that makes a sin/cos phase (analysis/phases.py)."""

    error: float  # the phase error (radians) rounding this store makes
    largest: float  # the bound on |phase|
    basis: str  # where that bound comes from: "static", "measured", "buffers as built" or "unit-scale inputs"
    sinusoid: str  # the sin/cos node
    stores_before: list  # the chain's earlier low-precision stores
    fix_ops: list  # the low-precision chain ops from this store on (its module's)
    assumed_buffers: tuple = ()  # persistent buffers the bound takes at their built values


class GemmDims:
    """What the FP8 and FP4 records say of their K, N, M and ``multiple`` alike."""

    @property
    def padded_k(self) -> int | None:
        return None if self.k is None else _round_up(self.k, self.multiple)

    @property
    def padded_n(self) -> int | None:
        return None if self.n is None else _round_up(self.n, self.multiple)

    @property
    def flops(self) -> int:
        """2*M*K*N of the forward GEMM on the example input, one rank's under --tp (0 where a
        size is unknown)."""
        return 2 * self.m * self.k * self.n if None not in (self.m, self.k, self.n) else 0


@dataclass(frozen=True)
class Fp8Facts(GemmDims):
    """What one linear node does under the FP8 target."""

    recipe: str
    #: an nn.Linear module's call: what torchao and Transformer Engine swap for an FP8 layer
    convertible: bool
    runs_fp8: bool
    #: why it stays bf16 ("" when it runs in FP8)
    fallback: str
    k: int | None  # in_features
    n: int | None  # out_features
    m: int | None  # rows (tokens) of the example input: set by the data, not the model
    multiple: int  # what K and N must be divisible by under the recipe
    #: no GEMM and no residual join follows it: the model's final projection (output head)
    output_head: bool
    #: the module whose weight it reads when not its own (an embedding-tied head), else None
    tied_to: str | None
    #: how --tp splits it (column, row, replicated; replicated without --tp); ``k`` and ``n``
    #: are one rank's dims, ``full_k`` and ``full_n`` the whole layer's
    split: str = "replicated"
    full_k: int | None = None
    full_n: int | None = None



@dataclass(frozen=True)
class Fp4Facts(GemmDims):
    """What one linear node does under an FP4 target (``--dtype nvfp4|mxfp4``; analysis/fp4.py)."""

    format: str  # nvfp4, mxfp4
    #: an nn.Linear module's call: what Transformer Engine and torchao swap for an FP4 layer
    convertible: bool
    runs_fp4: bool
    #: why it stays bf16 ("" when it runs in FP4)
    fallback: str
    k: int | None  # in_features on one rank (--tp)
    n: int | None  # out_features on one rank
    m: int | None  # rows (tokens) of the example input: set by the data, not the model
    multiple: int  # what K and N must be divisible by: 16 (NVFP4, TE is_quantizable), 32 (MXFP4)
    #: NVFP4: whether torchao's NVFP4 training path takes it too (K and N multiples of 128 on one
    #: rank; M, the tokens, as well); None for MXFP4
    torchao_training: bool | None
    split: str  # how --tp splits it: column, row, replicated
    output_head: bool
    tied_to: str | None
    #: the stack of repeated blocks (``model.layers``), its length, and this Linear's block (None
    #: outside the stack)
    stack: str | None
    blocks: int | None
    block: int | None
    full_k: int | None = None
    full_n: int | None = None


@dataclass(frozen=True)
class Fp8RangeFacts:
    """The error E4M3 adds to one Linear's measured input and weight (--data, the fp32 run)
    under each FP8 recipe's scales (analysis/fp8_ranges.py; capture/pytorch/fp8_ranges.py).

    ``input`` and ``weight`` hold per scheme: ``rows_above`` (how many rows, tokens or weight
    output rows, have a relative RMS error at or above each of ``levels``), ``flushed``
    (non-zero values stored as 0) and, for the input, per channel ``error_sq`` beside the
    channel's ``sq`` (sum of squares) and ``amax``."""

    recipe: str  # the target's recipe
    scheme: str  # the scaling its forward GEMM uses (``delayed`` is judged as ``tensorwise``)
    calls: int  # Linear calls measured (over all calibration batches)
    levels: tuple  # the relative errors ``rows_above`` counts at
    input: dict
    weight: dict | None  # None: the weight was not in memory (offloaded)

    def rows_share(self, level: float, tensor: str = "input", scheme: str | None = None) -> float | None:
        """The share of ``tensor``'s rows whose relative RMS error reaches ``level`` (one of
        ``levels``) under ``scheme`` (default: the recipe's); None where it was not measured."""
        counts = getattr(self, tensor)
        above = None if counts is None else counts["rows_above"].get(scheme or self.scheme)
        if above is None:
            return None
        return above[self.levels.index(level)] / counts["rows"] if counts["rows"] else 0.0

    def flushed_share(self, tensor: str = "input", scheme: str | None = None) -> float | None:
        counts = getattr(self, tensor)
        flushed = None if counts is None else counts["flushed"].get(scheme or self.scheme)
        if flushed is None:
            return None
        return flushed / counts["nonzero"] if counts["nonzero"] else 0.0

    def channel_errors(self, scheme: str | None = None, without: tuple = ()) -> list[float] | None:
        """Each input channel's relative RMS error under ``scheme`` (channels that saw only 0
        and those in ``without`` left out); None where the scheme cannot run the input."""
        err = self.input["error_sq"].get(scheme or self.scheme)
        if err is None:
            return None
        skip = set(without)
        return [math.sqrt(e / q) for k, (e, q) in enumerate(zip(err, self.input["sq"])) if q > 0 and k not in skip]

    def outlier_channels(self, ratio: float) -> tuple[list[int], float]:
        """(input channels whose amax is at least ``ratio`` times the median channel's, that
        median): the median of the channels that saw a non-zero value."""
        seen = sorted(a for a in self.input["amax"] if a > 0)
        if len(seen) < 2:
            return [], 0.0
        middle = median(seen)
        return [k for k, a in enumerate(self.input["amax"]) if a >= ratio * middle], middle


@dataclass(frozen=True)
class Fp4RangeFacts:
    """What FP4 did to one Linear's measured weight and inputs (--weights / --data under an FP4
    target; analysis/fp4_ranges.py, capture/pytorch/fp4_ranges.py): per operand the block and
    value counts and the round trip's signal and noise, per input channel amax / sum of squares
    / squared error; the forward GEMM's and the Wgrad GEMM's signal and noise against fp32."""

    format: str
    calls: int  # Linear calls measured (over all calibration batches)
    weight: dict | None  # None: the weight was not measured (offloaded, or K not blockable)
    input: dict | None  # None: no --data
    gemm: dict | None  # {"signal", "noise", "calls"}: the forward GEMM's output against fp32
    wgrad: dict | None  # the same for dW = dY^T X; None: no backward reached the layer

    def operand(self, tensor: str) -> dict | None:
        return getattr(self, tensor)

    def sqnr_db(self, part: str) -> float | None:
        """The SQNR in dB of ``part`` (input, weight: the round trip; gemm, wgrad: the GEMM's
        output); None where unmeasured or without error or signal."""
        counts = getattr(self, part)
        if not counts or not counts["signal"] or not counts["noise"]:
            return None
        return 10 * math.log10(counts["signal"] / counts["noise"])

    def block_share(self, tensor: str, kind: str) -> float | None:
        """The share of ``tensor``'s blocks holding a non-zero value that are ``kind``
        (subnormal, flushed, hollow, floor_clips); None where unmeasured."""
        counts = getattr(self, tensor)
        if counts is None:
            return None
        return counts[kind] / counts["blocks"] if counts["blocks"] else 0.0

    def zero_share(self, tensor: str) -> float | None:
        """The share of ``tensor``'s non-zero values stored as 0."""
        counts = getattr(self, tensor)
        if counts is None:
            return None
        return counts["zeros"] / counts["nonzero"] if counts["nonzero"] else 0.0

    def outlier_channels(self, ratio: float) -> tuple[list[int], float]:
        """(input channels whose amax is at least ``ratio`` times the median channel's, that
        median): the median of the channels that saw a non-zero value."""
        amax = (self.input or {}).get("amax") or []
        seen = sorted(a for a in amax if a > 0)
        if len(seen) < 2:
            return [], 0.0
        middle = median(seen)
        return [k for k, a in enumerate(amax) if a >= ratio * middle], middle

    def neighbour_error(self, channels, block: int) -> float | None:
        """The relative RMS error of the input channels that share a scale block (``block``
        channels along K) with ``channels``, those channels left out; None where they saw only 0."""
        inp = self.input
        skip = set(channels)
        mates = {j for k in channels for j in range(k - k % block, min(k - k % block + block, len(inp["sq"])))} - skip
        sq = sum(inp["sq"][j] for j in mates)
        return math.sqrt(sum(inp["error_sq"][j] for j in mates) / sq) if sq > 0 else None

    def channel_error(self, without=()) -> float | None:
        """The relative RMS error of the input channels other than ``without``, all together."""
        inp = self.input
        skip = set(without)
        sq = sum(q for j, q in enumerate(inp["sq"]) if j not in skip)
        err = sum(e for j, e in enumerate(inp["error_sq"]) if j not in skip)
        return math.sqrt(err / sq) if sq > 0 else None


def median(values) -> float | None:
    """The lower median of ``values`` (None for none)."""
    ordered = sorted(values)
    return ordered[(len(ordered) - 1) // 2] if ordered else None


def _round_up(size: int, multiple: int) -> int:
    return math.ceil(size / multiple) * multiple


#: node key -> the record class the pass writing it stores there
RECORDS = {"precision": PrecisionFacts, "kernel": KernelFacts, "constant": ConstantFacts,
           "reduction": ReductionFacts, "attention": AttentionFacts, "norm": NormFacts,
           "softmax": SoftmaxFacts, "rnn": RnnFacts, "integer": IntegerFacts,
           "calibration": CalibrationFacts, "range": RangeFacts, "phase": PhaseFacts, "fp8": Fp8Facts,
           "fp8_range": Fp8RangeFacts, "fp4": Fp4Facts, "fp4_range": Fp4RangeFacts,
           "work": WorkFacts}

#: the flat keys passes wrote before the records -> where they live now (``record.field``);
#: rule packs' ``where`` and message placeholders still name them
ALIASES = {
    "low_precision": "precision.low_precision", "why": "precision.why",
    "accumulate_dtype": "kernel.accumulate_dtype", "kernel_source": "kernel.source",
    "computes_statistics": "kernel.computes_statistics",
    "constants": "constant.as_dicts",
    "reduced_extent": "reduction.extent",
    "feeds_softmax": "attention.feeds_softmax", "scale_before": "attention.scale_before",
    "scale_after": "attention.scale_after", "scaled_before": "attention.scaled_before",
    "scaled_after": "attention.scaled_after", "head_dim": "attention.head_dim",
    "logits_from": "attention.logits_from",
    "norm_pattern": "norm.pattern", "square_node": "norm.square_node", "square_dtype": "norm.square_dtype",
    "softmax_output": "softmax.kind", "probs_consumer": "softmax.probs_consumer",
    "rnn_state_dtype": "rnn.state_dtype", "rnn_steps": "rnn.steps",
    "int_max": "integer.largest",
    "measured": "calibration.summary",
    "value_range": "range.value_range", "value_range_source": "range.source", "l2_bound": "range.l2_bound",
    "phase_error": "phase.error", "phase_max": "phase.largest", "phase_basis": "phase.basis",
    "phase_sinusoid": "phase.sinusoid", "phase_stores_before": "phase.stores_before",
    "phase_fix_ops": "phase.fix_ops",
}


def fact(node, path: str):
    """The value at ``path`` of a node: ``"record.field"``, an old flat key of ``ALIASES``, or
    a plain node key (an OpNode field); None where the record or key is absent."""
    path = ALIASES.get(path, path)
    key, _, attr = path.partition(".")
    value = node.get(key)
    if not attr:
        return value
    return None if value is None else getattr(value, attr, None)


#: old flat keys that were OpNode fields (None on every node until a pass filled them)
ALWAYS_PRESENT = {"accumulate_dtype", "reduced_extent", "value_range", "measured"}


def flat(node) -> dict:
    """The old flat keys a node had, with their values: the placeholders rule messages may name."""
    return {old: fact(node, old) for old, path in ALIASES.items()
            if old in ALWAYS_PRESENT or path.partition(".")[0] in node}


def path_error(path: str) -> str | None:
    """Why a ``where`` key of a rule pack names no fact, or None: a dotted key must name a
    record and one of its fields (or properties)."""
    key, dot, attr = path.partition(".")
    if not dot or path in ALIASES:
        return None
    record = RECORDS.get(key)
    if record is None:
        return f"{path!r} names no fact record (records: {', '.join(sorted(RECORDS))})"
    if attr not in field_names(record) and not isinstance(getattr(record, attr, None), property):
        return f"{path!r}: {record.__name__} has no field {attr!r} (fields: {', '.join(field_names(record))})"
    return None


def field_names(record_class) -> list[str]:
    return [f.name for f in fields(record_class)]
