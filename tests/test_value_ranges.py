"""The value-range pass (analysis/ranges.py) and the rules that consult it (PA105, PA106)."""
import math
import textwrap

import pytest
import torch
from conftest import findings_of, sample, scanned_graph

from precisionaudit.core.numerics import Target
from precisionaudit.rules.engine import load_rules
from precisionaudit.scanner import scan

HEADER = """
import math
import torch
import torch.nn.functional as F
from torch import nn

def get_example_inputs():
    return (torch.randn(2, 8, 64),)
"""


def model_file(tmp_path, forward, init="", name="m.py"):
    """A one-module model file: ``self.proj = nn.Linear(64, 64)`` plus ``init``, and ``forward``."""
    body = textwrap.indent(textwrap.dedent(forward).strip(), " " * 8)
    extra = textwrap.indent(textwrap.dedent(init).strip(), " " * 8) if init else ""
    source = HEADER + f"""
class M(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(64, 64)
{extra}

    def forward(self, x):
{body}

def get_model():
    return M()
"""
    path = tmp_path / name
    path.write_text(source)
    return str(path)


def rule_ids(path, dtype="float16", mode="autocast"):
    """Rules found on a model that must scan: a failed scan has no findings and proves nothing."""
    results, found = scan([path], Target(dtype, mode, "cuda"), load_rules())
    assert results[0].status == "ok", results[0].error
    return {f.rule for f in found}


def ranges_by_op(path, mode="pure"):
    graph = scanned_graph(path, mode=mode)
    return {a["op"]: a["range"].value_range for _, a in graph.nodes(data=True)}


def test_bounded_ops_and_elementwise_propagation(tmp_path):
    path = model_file(tmp_path, """
        h = self.proj(x)
        s = torch.sigmoid(h) * 2 - 1
        c = h.clamp(-3, 5).abs()
        p = torch.arange(16).float()
        return s.float(), c.float(), p
    """)
    ranges = ranges_by_op(path)
    assert ranges["linear"] is None  # a weight's output: nothing bounds it
    assert ranges["sigmoid"] == (0.0, 1.0)
    assert ranges["sub"] == (-1.0, 1.0)  # sigmoid * 2 - 1
    assert ranges["clamp"] == (-3.0, 5.0)
    assert ranges["abs"] == (0.0, 5.0)
    assert ranges["arange"] == (0.0, 15.0)


def test_rotary_frequencies_and_their_outer_product_with_positions(tmp_path):
    """``theta ** x`` is the scalar's power (not x to the 10000th), ``1.0 / y`` is bounded
    where y keeps its sign, and an outer product (or a matmul contracting 1) is a product."""
    path = model_file(tmp_path, """
        inv_freq = 1.0 / (10000 ** (torch.arange(0, 64, 2, dtype=torch.float32) / 64))
        pos = torch.arange(128, dtype=torch.float32)
        a = torch.outer(pos, inv_freq)
        b = pos[:, None] @ inv_freq[None, :]
        return a.sin(), b.cos(), self.proj(x).float()
    """)
    ranges = ranges_by_op(path)
    assert ranges["pow"] == pytest.approx((1.0, 10000.0))  # arange(0, 64, 2)'s range taken as [0, 64]
    assert ranges["rdiv"] == pytest.approx((1e-4, 1.0))
    assert ranges["outer"] == pytest.approx((0.0, 127.0)) and ranges["matmul"] == pytest.approx((0.0, 127.0))


def test_clamp_with_a_max_only_is_bounded_above_only(tmp_path):
    path = model_file(tmp_path, "return torch.exp(self.proj(x).clamp(max=10)).float()")
    assert ranges_by_op(path)["clamp"] == (float("-inf"), 10.0)


@pytest.mark.parametrize("forward", [
    "return torch.exp(self.proj(x).clamp(max=10)).float()",          # clamp before exp
    "h = self.proj(x)\nreturn torch.exp(h - h.amax(-1, keepdim=True)).float()",  # stable softmax
    "return torch.exp(-self.proj(x).abs()).float()",                   # exp of a non-positive value
    "h = self.proj(x)\nreturn (0.5 * h * (1 + torch.tanh(math.sqrt(2 / math.pi) * "
    "(h + 0.044715 * torch.pow(h, 3))))).float()",                     # gelu-tanh: x**3 saturates tanh
    "return torch.log(self.proj(x).clamp(min=1e-3)).float()",          # log away from 0
])
def test_exp_pow_log_of_bounded_arguments_are_silent(tmp_path, forward):
    assert "PA105" not in rule_ids(model_file(tmp_path, forward), mode="pure")


@pytest.mark.parametrize("init", ["torch.tensor(math.log(1 / 0.07))",  # CLIP: 0-d
                                  "torch.ones(1) * math.log(10)"])       # SigLIP: shape (1,)
def test_exp_of_a_scalar_temperature_parameter_is_silent(tmp_path, init):
    path = model_file(tmp_path, "return (self.proj(x) * self.logit_scale.exp()).float()",
                      init=f"self.logit_scale = nn.Parameter({init})")
    assert "PA105" not in rule_ids(path, mode="pure")


def test_exp_of_a_learned_vector_is_still_reported(tmp_path):
    """One temperature is a trained scalar; a vector of them is an activation-like tensor."""
    path = model_file(tmp_path, "return (self.proj(x) * self.scales.exp()).float()",
                      init="self.scales = nn.Parameter(torch.zeros(64))")
    assert "PA105" in rule_ids(path, mode="pure")


@pytest.mark.parametrize("forward", [
    "return torch.exp(self.proj(x).clamp(max=12)).float()",   # exp(12) = 162755 > 65504
    "return torch.exp(self.proj(x)).float()",
    "h = self.proj(x)\nreturn (torch.pow(h, 3) + 1).float()",  # x**3 not feeding a tanh
    "return torch.log(self.proj(x).softmax(-1)).float()",     # probabilities can be 0
])
def test_exp_pow_log_that_can_leave_the_range_still_fire(tmp_path, forward):
    assert "PA105" in rule_ids(model_file(tmp_path, forward), mode="pure")


COSINE = """
b, t, d = x.shape
q = F.normalize(self.proj(x), dim=-1)
k = self.proj(x)
k = k / k.norm(dim=-1, keepdim=True).clamp(min=1e-6)
scores = (q @ k.transpose(-2, -1)) * 10.0
return scores.softmax(-1).float()
"""


def test_logits_of_normalised_q_and_k_are_bounded_and_silent(tmp_path):
    path = model_file(tmp_path, COSINE)
    assert ranges_by_op(path, mode="autocast")["matmul"] == (-1.0, 1.0)
    assert "PA106" not in rule_ids(path)
    raw = COSINE.replace("F.normalize(self.proj(x), dim=-1)", "self.proj(x)")
    raw = raw.replace("k = k / k.norm(dim=-1, keepdim=True).clamp(min=1e-6)\n", "")
    raw = raw.replace("* 10.0", "/ 8.0")  # raw q.k stored in fp16, scaled down only after the matmul
    unnormalised = model_file(tmp_path, raw, name="raw.py")
    assert "PA106" in rule_ids(unnormalised)


def test_logits_overflow_is_an_fp16_hazard_only():
    """The GEMM accumulates in fp32 and stores bf16, whose range is fp32's: no 65504 there."""
    assert "PA106" in rule_ids(sample("pa106_logits_hazard.py"))
    assert "PA106" not in rule_ids(sample("pa106_logits_hazard.py"), dtype="bfloat16")


def test_pa105_message_names_the_dtype_threshold():
    found = next(f for f in findings_of(sample("pa105_exp_hazard.py"), mode="pure")
                 if f.rule == "PA105")
    assert "11.09" in found.message and "float16" in found.message


def test_a_hand_written_l2_norm_is_reported_at_its_square_not_its_root(tmp_path):
    """CLIP's _get_vector_norm: pow(x, 2) overflows for |x| > 256; pow(sum, 0.5) shrinks its
    argument and a vector norm's result is at most sqrt(n) * max|x|: neither is a hazard."""
    path = model_file(tmp_path, """
        h = self.proj(x)
        n = torch.pow(torch.sum(torch.pow(h, 2), dim=-1, keepdim=True), 0.5)
        g = torch.linalg.vector_norm(h, ord=2, dim=-1, keepdim=True)
        return (h / n + g).float()
    """)
    results, found = scan([path], Target("float16", "pure", "cuda"), load_rules())
    assert results[0].status == "ok", results[0].error
    assert sorted((f.rule, f.op) for f in found if f.rule in ("PA102", "PA103", "PA105")) == [
        ("PA102", "sum"), ("PA105", "pow")]


INVERSE_SIGMOID = """
x = torch.sigmoid(self.proj(x)).clamp(min=0, max=1)
x1 = x.clamp(min=1e-5)
x2 = (1 - x).clamp(min=1e-5)
return torch.log(x1 / x2).float()
"""


@pytest.mark.parametrize("dtype,mode", [("float16", "autocast"), ("bfloat16", "autocast"), ("float16", "pure")])
def test_detr_inverse_sigmoid_is_bounded_under_every_target(tmp_path, dtype, mode):
    """DETR's ``inverse_sigmoid`` (13 transformers model files): ``1 - x`` over [0, 1] is [0, 1]
    (aten records it as ``rsub(x, 1)``), so the clamp gives [1e-5, 1] and the division is
    bounded. It once came out [-1, 0], the clamp inverted it and the division by it raised
    ZeroDivisionError: an internal error under every target."""
    graph = scanned_graph(model_file(tmp_path, INVERSE_SIGMOID), dtype=dtype, mode=mode)
    by_name = {n: a["range"].value_range for n, a in graph.nodes(data=True)}
    assert graph.nodes["sub"]["target"] == "aten.rsub.Scalar"
    assert by_name["sub"] == (0.0, 1.0)
    low = getattr(torch, dtype)  # the sigmoid's output dtype: each interval is stored in it
    eps = torch.tensor(1e-5, dtype=low).item()
    assert by_name["clamp_2"] == (eps, 1.0)
    quotient = torch.tensor([eps / 1.0, 1.0 / eps], dtype=torch.float64).to(low).tolist()
    assert by_name["div"] == pytest.approx(tuple(quotient))  # 1 / 1e-5 is inf in fp16


def test_a_product_of_bounded_factors_keeps_its_sign(tmp_path):
    """RecurrentGemma's RG-LRU: ``-8 * sigmoid(.) * softplus(param)`` is <= 0 for any weights
    (softplus >= 0), so exp of it and of twice it lie in [0, 1]: no PA105 in pure fp16."""
    path = model_file(tmp_path, """
        log_a = -8.0 * torch.sigmoid(self.proj(x)) * F.softplus(self.decay)
        return (torch.exp(log_a) + torch.exp(2 * log_a)).float()
    """, init="self.decay = nn.Parameter(torch.randn(64))")
    ranges = ranges_by_op(path)
    assert ranges["softplus"] == (0.0, math.inf)
    assert ranges["exp"] == (0.0, 1.0)
    assert "PA105" not in rule_ids(path, mode="pure")


FROZEN_BATCH_NORM = """
weight = self.weight.reshape(1, -1, 1)
running_var = self.running_var.reshape(1, -1, 1)
scale = weight * (running_var + 1e-5).rsqrt()
return (x * scale).float()
"""
FROZEN_INIT = """
self.weight = nn.Parameter(torch.ones(8))
self.register_buffer("running_var", torch.ones(8))
"""


def test_a_frozen_batch_norms_rsqrt_of_its_variance_is_silent(tmp_path):
    """DETR's (and torchvision's) FrozenBatchNorm2d: ``(running_var + 1e-5).rsqrt()`` in pure
    fp16. A variance is never negative, so the argument is at least 1e-5 (a subnormal in fp16,
    1.0014e-5) and the rsqrt at most 316: it overflows only below 1 / 65504**2 = 2.3e-10."""
    assert torch.tensor(1e-5).half().rsqrt().item() == pytest.approx(316.0, rel=1e-2)
    assert torch.tensor(2.4e-10).rsqrt().half().isfinite() and not torch.tensor(2.2e-10).rsqrt().half().isfinite()
    path = model_file(tmp_path, FROZEN_BATCH_NORM, init=FROZEN_INIT)
    assert "PA105" not in rule_ids(path, mode="pure")
    unknown = model_file(tmp_path, FROZEN_BATCH_NORM.replace("running_var + 1e-5", "self.proj(x)[:1, :, :1] + 1e-5"),
                         init=FROZEN_INIT, name="unknown.py")
    assert "PA105" in rule_ids(unknown, mode="pure")  # a weight's output is no variance


@pytest.mark.parametrize("eps, reported", [(1e-5, True), (1e-4, False)])
def test_reciprocal_overflows_below_one_over_the_max(tmp_path, eps, reported):
    """1 / x is inf in fp16 for x < 1 / 65504 = 1.53e-5: 1 / 1e-5 is, 1 / 1e-4 is not."""
    assert torch.tensor(eps).half().reciprocal().isinf().item() == reported
    path = model_file(tmp_path, f"return (self.proj(x).abs() + {eps}).reciprocal().float()")
    assert ("PA105" in rule_ids(path, mode="pure")) == reported


def test_detr_inverse_sigmoid_in_pure_fp16_says_its_argument_overflows(tmp_path):
    """In fp16 a sigmoid of 9 is 1.0, so x2 = 1e-5 and x1 / x2 = 99864: inf, and log(inf)."""
    x = torch.tensor([1.0], dtype=torch.float16)
    assert torch.log(x.clamp(min=1e-5) / (1 - x).clamp(min=1e-5)).isinf().all()
    found = [f for f in findings_of(model_file(tmp_path, INVERSE_SIGMOID), mode="pure") if f.rule == "PA105"]
    assert [f.op for f in found] == ["log"]
    assert "its argument itself overflows float16 (up to inf)" in found[0].message
    assert "values in [1.001e-05, inf]" in found[0].message
