"""Value ranges: a static interval for each op's output (interval analysis over the IR).

Like torch.fx's ShapeProp writes shapes, this pass writes a ``RangeFacts`` (analysis/facts.py)
under ``range`` on every node: ``value_range = (lo, hi)`` where something bounds its output,
and None where nothing does. Sources of bounds:
ops with a bounded output (softmax/sigmoid in [0, 1], tanh/sin/cos/erf in [-1, 1],
normalize, clamp, relu6, hardtanh, norms without affine weights), constants (full, zeros,
ones, arange from its scalar arguments), signs (softplus >= 0) and relations
(``x - x.amax(dim)`` is <= 0). They propagate through elementwise arithmetic, casts, views,
concatenations, min/max and mean. Every interval is what the op's output dtype stores:
rounded to it (past its largest finite value: inf), truncated by a cast to an integer.
An interval the pass cannot bound is unknown (None), never an exception: the arithmetic
on ``(lo, hi)`` pairs is held to contain every value torch computes from values in the
operands' intervals (tests/test_range_arithmetic.py samples each op it models).
A weight, a model input or a GEMM output is unknown: values are never guessed. A
non-persistent buffer (a table the constructor computes and no checkpoint replaces, such
as a rotary ``inv_freq``) has the range of the values its constructor gave, which capture
records in ``graph.graph["buffer_ranges"]``. With
calibration data (--data) the range pass's measured interval of a node (analysis/measured.py)
stands in for an unknown one, and the static rules propagate from it
(``source``: "static" or "measured").

Its ``l2_bound`` is an upper bound on the L2 norm of the rows of an output
(F.normalize, x / x.norm(dim=-1, keepdim=True), then scaled by constants), so that a GEMM of
two normalised operands (cosine-similarity attention) has logits in [-c, c].
"""
from __future__ import annotations

import math

import networkx as nx

from ..core.numerics import LARGEST_FINITE, rounds_to
from ..ir.graph import numel, producers
from .facts import RangeFacts, fact
from .measured import measured_interval

INF = math.inf
UNIT = (0.0, 1.0)
VARIANCE = (0.0, INF)
SIGNED_UNIT = (-1.0, 1.0)
FIXED = {"sigmoid": UNIT, "softmax": UNIT, "hardsigmoid": UNIT, "tanh": SIGNED_UNIT,
         "sin": SIGNED_UNIT, "cos": SIGNED_UNIT, "erf": SIGNED_UNIT, "softsign": SIGNED_UNIT,
         "normalize": SIGNED_UNIT, "relu6": (0.0, 6.0)}
#: ops whose output values are some of their input's values (or the input's, re-laid out)
SAME = {"to", "float", "half", "bfloat16", "type_as", "view", "reshape", "transpose", "permute",
        "contiguous", "clone", "getitem", "unsqueeze", "squeeze", "expand", "expand_as", "flatten",
        "unflatten", "repeat", "repeat_interleave", "chunk", "split", "narrow", "select", "t",
        "detach", "view_as", "reshape_as", "movedim", "roll", "flip", "index_select", "gather"}
#: ops whose output is some of their input's values and zeros
SAME_OR_ZERO = {"tril", "triu"}
#: ops whose output lies within the hull of their operands (tensors and scalars)
HULL = {"cat", "stack", "where", "masked_fill", "amax", "amin", "max", "min", "median", "max_pool1d",
        "max_pool2d", "max_pool3d", "adaptive_max_pool2d", "interpolate", "upsample_nearest2d"}
#: averages over windows that may reach into zero padding (count_include_pad): the hull and 0
AVERAGES_WITH_PADDING = {"avg_pool1d", "avg_pool2d", "avg_pool3d"}
#: ops that sum their window before dividing: the sum can overflow the float32 accumulator
AVERAGES = {"mean", "nanmean", "adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_avg_pool3d",
            *AVERAGES_WITH_PADDING}
#: resampling with negative weights (the bicubic kernel overshoots its samples): no hull
OVERSHOOTING = ("upsample_bicubic2d", "_upsample_bicubic2d_aa")
#: elementwise max/min of two operands (by aten op: ``torch.max(x, 1)`` is a reduction):
#: monotone in each operand, so taken end by end
PAIRWISE = {"aten.maximum.default": max, "aten.minimum.default": min, "aten.max.other": max,
            "aten.min.other": min, "aten.fmax.default": max, "aten.fmin.default": min}
POINTS = {"zeros": 0.0, "zeros_like": 0.0, "new_zeros": 0.0, "ones": 1.0, "ones_like": 1.0,
          "new_ones": 1.0}
FULLS = {"full", "full_like", "new_full", "fill", "fill_", "scalar_tensor", "tensor"}
GEMMS = {"matmul", "bmm", "mm", "einsum"}
#: products of two operands without a sum: each output is one product (a GEMM contracting 1)
OUTER = {"outer", "ger"}
NORMS_WITHOUT_AFFINE = {"layer_norm", "rms_norm"}
#: the most elements a tensor can have (numel is an int64): the extent of a sum over a dim
#: that is unknown (an ONNX symbolic dim)
MAX_NUMEL = 2**63 - 1
L2_NORMS = {"norm", "linalg_vector_norm"}
#: the open interval of values an integer dtype holds (a cast truncates toward 0 inside it)
INTEGER_LIMITS = {"int64": (-2.0**63 - 1, 2.0**63), "int32": (-2.0**31 - 1, 2.0**31),
                  "int16": (-2.0**15 - 1, 2.0**15), "int8": (-129.0, 128.0), "uint8": (-1.0, 256.0)}
#: ops between a norm and the division by it that keep it a lower bound of the norm's value
DIVISOR_PATH = {"clamp", "clamp_min", "to", "float", "half", "add", "expand_as", "expand"}


def _numbers(node, kinds=(int, float)):
    return [v for _, v in node["scalars"] if isinstance(v, kinds) and not isinstance(v, bool)]


def _hull(ranges):
    if not ranges or any(r is None for r in ranges):
        return None
    return (min(r[0] for r in ranges), max(r[1] for r in ranges))


def _mul(a, b):
    def times(x, y):
        return 0.0 if x == 0 or y == 0 else x * y
    products = [times(x, y) for x in a for y in b]
    return (min(products), max(products))


def _exp(x):
    try:
        return math.exp(x)
    except OverflowError:
        return INF


def _expm1(x):
    try:
        return math.expm1(x)
    except OverflowError:
        return INF


def _power(x, p):
    """``x ** p`` as a float: inf where it overflows (Python raises)."""
    try:
        return float(x) ** p
    except OverflowError:
        return math.copysign(INF, x) if p % 2 == 1 else INF


def _pow(r, p):
    """``x ** p``: an even power is smallest at 0; any other is monotone on an interval that
    keeps one sign (an odd or positive power on any interval, a fractional one on x >= 0)."""
    lo, hi = r
    integer = float(p).is_integer()
    if integer and p >= 0 and int(p) % 2 == 0:
        ends = [_power(abs(lo), int(p)), _power(abs(hi), int(p))]
        return (0.0 if lo <= 0 <= hi else min(ends), max(ends))
    p = int(p) if integer else p
    if (integer and p > 0) or (p > 0 and lo >= 0) or lo > 0 or (integer and hi < 0):
        ends = (_power(lo, p), _power(hi, p))
        return (min(ends), max(ends))
    return None


def _scalar_pow(base, lo, hi):
    """``base ** x`` for x in [lo, hi] (a positive base: increasing above 1, decreasing below)."""
    if base <= 0 or lo == -INF or hi == INF:
        return None
    try:
        ends = (base ** lo, base ** hi)
    except OverflowError:
        return None
    return (min(ends), max(ends))


def _softplus(node, r):
    """``log(1 + exp(beta * x)) / beta``, and x itself where beta * x > threshold (torch's
    softplus): increasing in x and never negative, whatever x is (beta > 0)."""
    numbers = _numbers(node)  # (beta, threshold) where the call passed them
    beta = numbers[0] if numbers else 1.0
    threshold = numbers[1] if len(numbers) > 1 else 20.0
    if beta <= 0:
        return None
    lo, hi = r if r is not None else (-INF, INF)

    def softplus(x):
        return x if beta * x > threshold else math.log1p(_exp(beta * x)) / beta
    return (max(softplus(lo), 0.0), softplus(hi))


def _other_operands(graph, node, input_range=None, buffers=None):
    """Ranges of the operands no node produces: buffers, read directly or through a view (the
    values their constructor gave, ``buffer_ranges``, and those a caller assumes, ``buffers``;
    parameters are unknown), model inputs (unknown, or ``input_range``) and operands capture
    could not trace (unknown)."""
    tables = {**(graph.graph.get("buffer_ranges") or {}), **(buffers or {})}
    buffers = [tables.get(p, VARIANCE if p.rsplit(".", 1)[-1] == "running_var" else None)
               for p, _ in [*node["params"], *node.get("param_views", ())]]
    return buffers + [input_range] * len(node.get("sources") or ()) + [None] * node.get("untracked_operands", 0)


def _operands(graph, name, node, ranges, input_range=None, buffers=None):
    """Ranges of a binary op's two operands, in argument order; None when one is unknown.
    Buffers and model inputs count for add and mul only, whose operand order does not matter.
    aten's rsub (``1 - x`` records ``rsub(x, 1)``, whatever the call's name) is ``other - self``:
    its operands come back as the subtraction's."""
    preds = producers(graph, name)
    tensors = [ranges.get(p) for p in preds]
    numbers = _numbers(node)
    others = _other_operands(graph, node, input_range, buffers)
    if len(preds) == 1 and not numbers and not others:
        tensors = tensors * 2  # x op x: one producer feeding both operands
    if others and node["op"] not in ("mul", "add"):
        return None
    operands = tensors + others + [(float(v), float(v)) for v in numbers]
    if len(operands) != 2:
        return None
    if any(o is None for o in operands):
        return None
    if node["target"].startswith("aten.rsub"):
        operands.reverse()
    return operands


def _max_of_own_input(graph, minuend, subtrahend) -> bool:
    """``x - x.amax(dim, keepdim=True)``: the subtrahend is the largest value of the minuend."""
    node = graph.nodes[subtrahend]
    return node["op"] in ("amax", "max", "logsumexp") and minuend in producers(graph, subtrahend)


def _rounded_quotient(node, q):
    """``div(rounding_mode=...)`` and ``//``: the quotient floored or truncated (monotone),
    so the ends are rounded; which mode is not recorded, so both are allowed."""
    if node["target"].startswith("aten.floor_divide"):
        return tuple(x if math.isinf(x) else float(math.floor(x)) for x in q)
    if node["target"].startswith("aten.div.") and "_mode" in node["target"]:
        return (q[0] if math.isinf(q[0]) else float(math.floor(q[0])),
                q[1] if math.isinf(q[1]) else float(math.ceil(q[1])))
    return q


def _arith(graph, name, node, ranges, input_range=None, buffers=None):
    op = node["op"]
    preds = producers(graph, name)
    if op == "sub" and len(preds) == 2 and _max_of_own_input(graph, preds[0], preds[1]):
        return (-INF, 0.0)
    pair = _operands(graph, name, node, ranges, input_range, buffers)
    if pair is None:
        return None
    a, b = pair
    if op == "add":
        return (a[0] + b[0], a[1] + b[1])
    if op in ("sub", "rsub"):
        return (a[0] - b[1], a[1] - b[0])
    if op == "mul":
        return _mul(a, b)
    if op == "rdiv":
        a, b = b, a  # c / x
    if op in ("div", "rdiv") and (b[0] > 0 or b[1] < 0):
        return _rounded_quotient(node, _mul(a, (1 / b[1], 1 / b[0])))
    return None


def _unary(node, r):
    """Monotone and bounded elementwise functions of one operand (unknown: all reals)."""
    op = node["op"]
    lo, hi = r if r is not None else (-INF, INF)
    if op == "neg":
        return (-hi, -lo)
    if op == "abs":
        return (0.0 if lo <= 0 <= hi else min(abs(lo), abs(hi)), max(abs(lo), abs(hi)))
    if op == "exp":
        return (_exp(lo), _exp(hi))
    if op == "expm1":
        return (_expm1(lo), _expm1(hi))
    if op == "log" and lo > 0:
        return (math.log(lo), math.log(hi))
    if op == "sqrt" and lo >= 0:
        return (math.sqrt(lo), math.sqrt(hi))
    if op == "rsqrt" and lo > 0:
        return (1 / math.sqrt(hi), 1 / math.sqrt(lo))
    if op == "reciprocal" and (lo > 0 or hi < 0):
        return (1 / hi, 1 / lo)
    if op == "square":
        return _pow((lo, hi), 2)
    if op == "pow":
        numbers = _numbers(node)
        if len(numbers) != 1:
            return None
        if node["target"].startswith("aten.pow.Scalar"):  # base ** x: monotone in x
            return _scalar_pow(numbers[0], lo, hi)
        return _pow((lo, hi), numbers[0])
    if op == "relu":
        return (max(lo, 0.0), max(hi, 0.0))
    if op == "softplus":
        return _softplus(node, r)
    return None


def _clamp(node, r):
    """``min(max(x, lo), hi)``, taken at both ends of x's interval (it is monotone in x)."""
    bounds = [v for _, v in node["scalars"] if not isinstance(v, bool)]
    if node["op"] == "clamp_min" or (node["op"] == "clamp" and len(bounds) == 1):
        bounds = [bounds[0], None]  # clamp(x, min) (a max alone is recorded as (None, max))
    elif node["op"] == "clamp_max":
        bounds = [None, bounds[0]]
    if len(bounds) != 2:
        return r
    floor, ceiling = bounds

    def clamped(x):
        x = x if floor is None else max(x, floor)
        return x if ceiling is None else min(x, ceiling)
    lo, hi = r or (-INF, INF)
    return (clamped(lo), clamped(hi))


def _summed_first(hull, node):
    """An average's hull, with an end made infinite where the sum of the values it averages
    (at most all of its input) could pass float32's largest value before the division."""
    if hull is None:
        return None
    sizes = [numel(s) for s in node["in_shapes"] if s]
    extent = MAX_NUMEL if None in sizes else max(sizes, default=1)  # a symbolic dim: any size a tensor has
    return tuple(v if abs(v) * extent < LARGEST_FINITE["float32"] else math.copysign(INF, v) for v in hull)


def _unbounded(r):
    return r is None or (r[0] == -INF and r[1] == INF)


def _norm_extent(node) -> int | None:
    """How many elements a layer_norm / rms_norm normalises over: its normalized_shape where
    capture recorded it (native_layer_norm's ints), an ONNX LayerNormalization's dims from its
    axis on, else every element of the output; None where a dim it spans is unknown."""
    ints = [v for op, v in node["scalars"] if op == "native_layer_norm" and isinstance(v, int)
            and not isinstance(v, bool)]
    if ints:
        return math.prod(ints)
    shape = node["out_shape"]
    if node["target"] == "onnx::LayerNormalization" and node["dims"] and shape:
        shape = shape[node["dims"][0] % len(shape):]
    return numel(shape)


def value_range(graph, name, node, ranges, input_range=None, buffers=None):
    """The interval of ``name``'s output from its operands' ``ranges``; the model inputs an op
    reads are unknown, or ``input_range`` when a caller assumes one (PA113's unit scale), and
    so are persistent buffers, or ``buffers`` (name -> range) when a caller assumes them."""
    op = node["op"]
    preds = producers(graph, name)
    inputs = [ranges.get(p) for p in preds]
    others = _other_operands(graph, node, input_range, buffers)
    only = inputs[0] if len(inputs) == 1 and not others else others[0] if not inputs and len(others) == 1 else None
    if op in FIXED:
        return FIXED[op]
    if op in POINTS:
        return (POINTS[op], POINTS[op])
    if op in FULLS:
        numbers = _numbers(node)
        return (float(numbers[-1]),) * 2 if numbers else None
    if op == "arange":
        ints = _numbers(node)
        if len(ints) == 1:
            return (0.0, float(ints[0]) - 1)
        return (float(min(ints[0], ints[1])), float(max(ints[0], ints[1]))) if ints else None
    if op in ("clamp", "clamp_min", "clamp_max", "hardtanh"):
        if op == "hardtanh" and not node["scalars"]:
            return SIGNED_UNIT
        if len(inputs) + len(others) > 1:  # tensor bounds (clamp.Tensor): within all operands
            return _hull(inputs + others + [(float(v), float(v)) for v in _numbers(node)])
        return _clamp(dict(node, op="clamp") if op == "hardtanh" else node, only)
    if op in NORMS_WITHOUT_AFFINE and not node["params"] and node["out_shape"]:
        extent = _norm_extent(node)  # |x - mean| / std <= sqrt(N) over N elements
        return None if extent is None else (-math.sqrt(extent), math.sqrt(extent))
    if op in SAME:
        return only
    if op in SAME_OR_ZERO:
        return _hull([only, (0.0, 0.0)])
    tensors = [r for p, r in zip(preds, inputs) if graph.nodes[p]["out_dtype"] != "bool"]
    operands = tensors + others + [(float(v), float(v)) for v in _numbers(node)]
    if node["target"] in PAIRWISE and len(operands) == 2:
        pick = PAIRWISE[node["target"]]  # an unknown operand is all reals: its ends are -inf and inf
        ends = [o or (-INF, INF) for o in operands]
        return (pick(ends[0][0], ends[1][0]), pick(ends[0][1], ends[1][1]))
    if op in AVERAGES:
        hull = _hull(tensors + [(0.0, 0.0)]) if op in AVERAGES_WITH_PADDING else _hull(operands)
        return _summed_first(hull, node)
    if op in HULL and not any(a in OVERSHOOTING for a in node.get("atens", ())):
        return _hull(operands)  # scalar dims widen the hull: loose, never wrong
    if op in ("sum", "nansum") and only is not None and fact(node, "reduction.extent"):
        n = fact(node, "reduction.extent")
        return _mul(only, (0.0, float(n)))
    if op in ("add", "sub", "rsub", "mul", "div", "rdiv"):
        return _arith(graph, name, node, ranges, input_range, buffers)
    if op in OUTER or (op in GEMMS and contraction(node) == 1):
        operands = inputs + others
        return _mul(*operands) if len(operands) == 2 and None not in operands else None
    if op in GEMMS and len(preds) == 2:
        bounds = [fact(graph.nodes[p], "range.l2_bound") for p in preds]
        if all(b is not None for b in bounds):
            return (-bounds[0] * bounds[1], bounds[0] * bounds[1])
        return None
    return _unary(node, only)


def stored(r, node):
    """``r`` as the op's output dtype holds it: each end rounded to it (inf past its largest
    finite value), truncated toward 0 by a cast to an integer dtype; None when ``r`` is not an
    interval (a NaN end, or ends the wrong way round)."""
    if r is None or any(math.isnan(v) for v in r) or r[0] > r[1]:
        return None
    dtype = node["out_dtype"]
    if dtype in ("float16", "bfloat16", "float32"):
        return (rounds_to(r[0], dtype), rounds_to(r[1], dtype))
    if dtype == "bool":
        return (0.0, 1.0)
    if dtype in INTEGER_LIMITS:  # a float beyond the integer type's range casts to anything
        low, high = INTEGER_LIMITS[dtype]
        return tuple(float(math.trunc(v)) for v in r) if low < r[0] and r[1] < high else None
    return r


def contraction(node) -> int | None:
    """The contracted extent of a matmul/mm/bmm (its first operand's last dim); 1 for an
    einsum that sums nothing (``"i,j->ij"``: it runs as one broadcast ``mul``)."""
    shapes = node["in_shapes"]
    if node["op"] == "einsum" and node.get("atens") and set(node["atens"]) == {"mul"}:
        return 1
    if node["op"] in ("matmul", "mm", "bmm") and shapes and shapes[0]:
        return shapes[0][-1]
    return None


def _divides_by_own_norm(graph, name) -> bool:
    """``x / x.norm(dim=-1, keepdim=True)`` (through clamp(min=eps) / + eps)."""
    preds = producers(graph, name)
    if len(preds) != 2:
        return False
    numerator, divisor = preds
    for _ in range(4):
        node = graph.nodes[divisor]
        if node["op"] in L2_NORMS:
            return numerator in producers(graph, divisor)
        if node["op"] not in DIVISOR_PATH or not producers(graph, divisor):
            return False
        divisor = producers(graph, divisor)[0]
    return False


def l2_bound(graph, name, node):
    op = node["op"]
    preds = producers(graph, name)
    if op == "normalize":
        return 1.0
    if op == "div" and _divides_by_own_norm(graph, name):
        return 1.0
    if not preds:
        return None
    first = fact(graph.nodes[preds[0]], "range.l2_bound")
    if first is None or len(preds) != 1:
        return None
    if op in SAME:
        return first
    numbers = _numbers(node, (int, float))
    if op in ("mul", "div") and len(numbers) == 1 and numbers[0] != 0:
        return first * abs(numbers[0]) if op == "mul" else first / abs(numbers[0])
    return None


def node_range(graph, name, node, ranges):
    """The static interval of ``name``'s output as stored (``value_range``, then ``stored``);
    an interval whose arithmetic fails (an overflow Python raises) is unknown."""
    try:
        return stored(value_range(graph, name, node, ranges), node)
    except ArithmeticError:
        return None


def annotate(graph):
    ranges = {}
    for name in nx.topological_sort(graph):
        node = graph.nodes[name]
        r = node_range(graph, name, node, ranges)
        source = "static"
        if _unbounded(r) and measured_interval(node) is not None:
            r, source = measured_interval(node), "measured"  # --data: what the batches reached
        ranges[name] = r
        known = None if _unbounded(r) else tuple(r)
        node["range"] = RangeFacts(value_range=known, source=None if known is None else source,
                                   l2_bound=l2_bound(graph, name, node))
