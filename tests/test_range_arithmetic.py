"""The value-range pass's interval arithmetic (analysis/ranges.py), held to what torch computes.

For every op the pass models, a model line applies it to unknown-range operands (the outputs
of three Linears cast to fp32, ``a``, ``b``, ``c``). The model is captured once, as a scan captures it;
hypothesis then gives those operands intervals (special values, infinities and degenerate
ones included), the pass works out each line's interval from them (``node_range``, in
forward order, as ``annotate`` does), and torch computes the line itself, in float64, on
tensors drawn from the same intervals: filled with one end, the other end, or values from
inside with both ends among them. Every value torch produces, stored in the line's output
dtype, must lie in the interval (an unknown interval claims nothing; NaN is no value).
"""
import math
import textwrap

import networkx as nx
import pytest
import torch
import torch.nn.functional as F  # noqa: N812 - the expressions use F, as model code does
from conftest import scanned_graph
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from precisionaudit.analysis.ranges import node_range
from precisionaudit.core.numerics import SMALLEST_SUBNORMAL, UNIT_ROUNDOFF, rounds_to
from precisionaudit.ir.graph import producers

SHAPE = (2, 4, 8)
#: id → an expression of a, b, c (float32, SHAPE), one per op or op variant the pass models
EXPRESSIONS = {
    # bounded outputs
    "sigmoid": "torch.sigmoid(a)", "softmax": "a.softmax(-1)", "hardsigmoid": "F.hardsigmoid(a)",
    "tanh": "torch.tanh(a)", "sin": "torch.sin(a)", "cos": "torch.cos(a)", "erf": "torch.erf(a)",
    "softsign": "F.softsign(a)", "normalize": "F.normalize(a, dim=-1)", "relu6": "F.relu6(a)",
    "hardtanh": "F.hardtanh(a)", "hardtanh_bounds": "F.hardtanh(a, -2.0, 5.0)",
    "layer_norm": "F.layer_norm(a, (8,))", "layer_norm_2d": "F.layer_norm(a, (4, 8))",
    "rms_norm": "F.rms_norm(a, (8,))",
    # constants
    "full_like": "torch.full_like(a, 2.5)", "arange": "torch.arange(3, 11, 2).float() + a[0, 0, 0]",
    "zeros_like": "torch.zeros_like(a) + b", "new_full": "a.new_full((3,), -7.0) + b[0, 0, :3]",
    # casts and copies
    "half": "a.half()", "bfloat16": "a.to(torch.bfloat16)", "to_int": "a.to(torch.int32)",
    "to_bool": "a.to(torch.bool)", "roll": "a.roll(1, -1)", "flip": "a.flip(-1)", "tril": "a.tril()", "triu": "a.triu(1)",
    # hulls
    "cat": "torch.cat([a, b], -1)", "stack": "torch.stack([a, b])", "where": "torch.where(c > 0, a, 0.5)",
    "masked_fill": "a.masked_fill(c > 0, -3.0)", "mean": "a.mean(-1)", "amax": "a.amax(-1)",
    "amin": "a.amin(-1)", "max_dim": "a.max(-1).values", "min_dim": "a.min(-1)[0]",
    "median": "a.median(-1).values", "avg_pool1d": "F.avg_pool1d(a, 3, 1, 1)",
    "avg_pool2d": "F.avg_pool2d(a, 3, 1, 1)", "adaptive_avg_pool1d": "F.adaptive_avg_pool1d(a, 3)",
    "max_pool1d": "F.max_pool1d(a, 3, 1, 1)", "max_pool2d": "F.max_pool2d(a, 3, 1, 1)",
    "adaptive_max_pool2d": "F.adaptive_max_pool2d(a, 3)", "nanmean": "a.nanmean(-1)", "interpolate_nearest": "F.interpolate(a, scale_factor=2)",
    "interpolate_linear": "F.interpolate(a, scale_factor=2, mode='linear')",
    "interpolate_bicubic": "F.interpolate(a[:, None], scale_factor=2, mode='bicubic')",
    "maximum": "torch.maximum(a, b)", "minimum": "torch.minimum(a, b)", "max_pair": "torch.max(a, b)",
    "max_constant": "torch.max(a, torch.tensor(-3.0))", "clamp_tensor": "torch.clamp(a, min=b)",
    # clamps
    "clamp_min": "a.clamp(min=1e-5)", "clamp_max": "a.clamp(max=3)", "clamp": "a.clamp(-2, 3)",
    "clamp_inverted": "a.clamp(2, -1)", "clamp_min_method": "a.clamp_min(0.5)",
    "clamp_max_method": "a.clamp_max(-0.5)",
    # sums
    "sum": "a.sum(-1)", "sum_all": "a.sum()", "nansum": "a.nansum(-1)",
    # relations: a value less its own row's largest value (or log-sum-exp) is <= 0
    "minus_amax": "a - a.amax(-1, keepdim=True)", "minus_max": "a - a.max(-1, keepdim=True).values",
    "minus_logsumexp": "a - a.logsumexp(-1, keepdim=True)",
    # arithmetic
    "add": "a + b", "sub": "a - b", "mul": "a * b", "div": "a / b", "add_scalar": "a + 2.5",
    "sub_scalar": "a - 2.5", "rsub_scalar": "2.5 - a", "rsub": "torch.rsub(a, 2.5)", "neg_scale": "-3.0 * a",
    "square_by_mul": "a * a", "self_add": "a + a", "self_sub": "a - a", "div_scalar": "a / 4.0",
    "div_negative": "a / -4.0", "rdiv": "1.0 / a", "rdiv_negative": "-2.0 / a",
    "div_floor": "torch.div(a, 3.0, rounding_mode='floor')",
    "div_trunc": "torch.div(a, 3.0, rounding_mode='trunc')", "floordiv": "a // 2",
    # products without a sum
    "outer": "torch.outer(a[0, 0], b[0, 0])", "einsum_outer": "torch.einsum('i,j->ij', a[0, 0], b[0, 0])", "matmul_outer": "a[..., :, None] @ b[..., None, :]",
    # GEMMs of rows of bounded L2 norm
    "cosine": "F.normalize(a, dim=-1) @ F.normalize(b, dim=-1).transpose(-1, -2)",
    "cosine_by_norm": "(a / a.norm(dim=-1, keepdim=True).clamp(min=1e-6)) @ "
                      "(b / b.norm(dim=-1, keepdim=True).clamp(min=1e-6)).transpose(-1, -2) * 10.0",
    # unary functions
    "neg": "-a", "abs": "a.abs()", "exp": "a.exp()", "expm1": "torch.expm1(a)", "log": "a.log()",
    "sqrt": "a.sqrt()", "rsqrt": "a.rsqrt()", "reciprocal": "a.reciprocal()", "square": "a.square()",
    "pow2": "a ** 2", "pow3": "a ** 3", "pow_half": "a ** 0.5", "pow_minus1": "a ** -1",
    "scalar_pow": "2.0 ** a", "scalar_pow_small": "0.5 ** a", "relu": "F.relu(a)",
    "softplus": "F.softplus(a)", "softplus_beta": "F.softplus(a, beta=2.0, threshold=5.0)",
    "softplus_beta_only": "F.softplus(a, beta=0.5)",
    # the chains of issue 36: DETR's inverse_sigmoid, RecurrentGemma's RG-LRU gate
    "inverse_sigmoid": "torch.log(a.clamp(0, 1).clamp(min=1e-5) / (1 - a.clamp(0, 1)).clamp(min=1e-5))",
    "rg_lru_gate": "torch.exp(2 * (-8.0 * torch.sigmoid(b) * F.softplus(a)))",
}
MODEL = '''
import torch
import torch.nn.functional as F
from torch import nn


class M(nn.Module):
    def __init__(self):
        super().__init__()
        self.fa, self.fb, self.fc = nn.Linear(8, 8), nn.Linear(8, 8), nn.Linear(8, 8)

    def forward(self, x):
        a, b, c = self.fa(x).float(), self.fb(x).float(), self.fc(x).float()
        out = []
{lines}
        return out


def get_model():
    return M()


def get_example_inputs():
    return (torch.randn{shape},)
'''


@pytest.fixture(scope="module")
def captured(tmp_path_factory):
    """(graph, {expression id: its output node}, {"a"|"b"|"c": its source node}, forward order):
    one capture under fp16 autocast (the sources are Linear outputs cast to fp32, so elementwise
    ops compute in fp32; the GEMMs store fp16)."""
    ids = list(EXPRESSIONS)
    lines = "\n".join(f"        out.append({EXPRESSIONS[i]})" for i in ids)
    path = tmp_path_factory.mktemp("ranges") / "ops.py"
    path.write_text(MODEL.format(lines=lines, shape=SHAPE))
    first = MODEL.split("\n").index("{lines}") + 1
    graph = scanned_graph(str(path))
    by_line = {}
    for name, node in graph.nodes(data=True):
        by_line.setdefault(node["line"], []).append(name)
    outputs = {}
    for k, expression_id in enumerate(ids):
        names = by_line.get(first + k, [])
        ends = [n for n in names if not any(s in names for s in graph.successors(n))]
        outputs[expression_id] = ends[-1] if ends else None
    linears = {node["module"]: name for name, node in graph.nodes(data=True) if node["op"] == "linear"}
    sources = {m[1]: next(iter(graph.successors(linears[m]))) for m in ("fa", "fb", "fc")}
    return graph, outputs, sources, list(nx.topological_sort(graph))


def test_every_expression_is_a_node_of_its_own(captured):
    """Each line of the table reaches the pass as a node (a view alone would test nothing)."""
    _, outputs, sources, _ = captured
    assert set(sources) == {"a", "b", "c"}
    assert [i for i, name in outputs.items() if name is None] == []


SPECIAL = [0.0, -0.0, 1.0, -1.0, 1e-5, -1e-5, 0.5, 2.0, -2.0, 11.0, 100.0, -100.0, 65504.0, 70000.0,
           1e6, -1e6, 1e30, -1e30, math.inf, -math.inf]
ENDS = st.one_of(st.sampled_from(SPECIAL), st.floats(-1e4, 1e4, allow_nan=False),
                 st.floats(allow_nan=False, allow_infinity=True, width=32))


@st.composite
def intervals(draw):
    """(lo, hi), stored in float32 as the sources are (one in four a single value)."""
    lo, hi = sorted(rounds_to(draw(ENDS), "float32") for _ in range(2))
    return (lo, lo) if draw(st.booleans()) and draw(st.booleans()) else (lo, hi)


def _finite(x):
    return max(min(x, 3e38), -3e38)


def _filled(interval, fill, generator):
    """A float32 tensor of SHAPE (the sources' dtype) with values in ``interval``: all one end,
    or values from inside with both ends (infinite ones too) among them."""
    lo, hi = interval
    if fill in ("lo", "hi"):
        return torch.full(SHAPE, lo if fill == "lo" else hi, dtype=torch.float32)
    u = torch.rand(SHAPE, generator=generator, dtype=torch.float64)
    flo, fhi = _finite(lo), _finite(hi)
    values = flo * (1 - u) + fhi * u
    inside = [v for v in (0.0, 1.0, -1.0) if lo <= v <= hi]
    flat = values.flatten()
    for k, v in enumerate([lo, hi, *inside]):
        flat[k * 5] = v
    return flat.view(SHAPE).float().clamp(lo, hi)


def _interval_of(captured, output, given):
    """The pass's interval at ``output`` with the sources' intervals ``given`` (as annotate
    computes it: node_range in forward order)."""
    graph, _, sources, order = captured
    ranges = {sources[k]: v for k, v in given.items()}
    needed = nx.ancestors(graph, output) | {output}
    for name in order:
        if name in needed and name not in ranges:
            ranges[name] = node_range(graph, name, graph.nodes[name], ranges)
    return ranges[output]


def _within(value, lo, hi, dtype) -> bool:
    """lo <= value <= hi, up to rounding: the pass computes each op's ends in float64 and stores
    them rounded to nearest, while torch's fp32 kernels (exp, softplus) are a few ulps off and
    a chain carries that on (exp of -14 turns one ulp of its argument into 1e-6 of its value).
    So a few roundings of a low dtype, 2^-16 of the value in fp32: far below any interval a
    wrong rule would give (1 - x taken for x - 1 was off by 1)."""
    if lo <= value <= hi:
        return True
    name = {torch.float16: "float16", torch.bfloat16: "bfloat16"}.get(dtype, "float32")
    end = lo if value < lo else hi
    slack = max(4 * UNIT_ROUNDOFF[name], 2.0 ** -16) * abs(end) + SMALLEST_SUBNORMAL[name]
    return math.isfinite(end) and abs(value - end) <= slack


def _outputs(result):
    return [t for t in (result if isinstance(result, (tuple, list)) else [result]) if isinstance(t, torch.Tensor)]


@pytest.mark.parametrize("expression_id", list(EXPRESSIONS))
@settings(max_examples=25, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(a=intervals(), b=intervals(), c=intervals(), seed=st.integers(0, 2**16))
def test_each_interval_holds_every_value_torch_computes(captured, expression_id, a, b, c, seed):
    graph, outputs, _, _ = captured
    given_ranges = {"a": a, "b": b, "c": c}
    bound = _interval_of(captured, outputs[expression_id], given_ranges)
    if bound is None:
        return  # unknown: the pass claims nothing
    lo, hi = bound
    assert lo <= hi, bound
    out_dtype = getattr(torch, graph.nodes[outputs[expression_id]]["out_dtype"])
    generator = torch.Generator().manual_seed(seed)
    for fill in ("inside", "lo", "hi"):
        tensors = {k: _filled(v, fill, generator) for k, v in given_ranges.items()}
        with torch.no_grad():
            result = eval(EXPRESSIONS[expression_id], {"torch": torch, "F": F}, tensors)  # noqa: S307
        for t in _outputs(result):
            stored = t.to(out_dtype).double() if t.is_floating_point() else t.double()
            values = stored[~stored.isnan()]
            if values.numel() == 0:
                continue
            low, high = values.min().item(), values.max().item()
            assert _within(low, lo, hi, out_dtype) and _within(high, lo, hi, out_dtype), (
                f"{EXPRESSIONS[expression_id]} with a={a}, b={b}, c={c} ({fill}): torch gives "
                f"[{low}, {high}], the pass says {bound}")


#: lines the pass leaves unknown even on bounded positive operands (none should be vacuous
#: by accident): bicubic resampling overshoots its samples
UNKNOWN_ON_BOUNDED = {"interpolate_bicubic"}


def test_the_property_is_not_vacuous(captured):
    """With every operand in [0.5, 2] the pass bounds every line but those it must not: the
    property above is checked on real intervals, not on unknowns."""
    _, outputs, _, _ = captured
    given = {"a": (0.5, 2.0), "b": (0.5, 2.0), "c": (0.5, 2.0)}
    unknown = {i for i, name in outputs.items() if _interval_of(captured, name, given) is None}
    assert unknown == UNKNOWN_ON_BOUNDED
