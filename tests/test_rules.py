"""Every rule fires on its hazard sample and stays silent on its clean twin."""
import pytest
import torch
from conftest import findings_of, sample, scanned_graph

from precisionaudit.core.numerics import Target
from precisionaudit.rules.engine import load_rules
from precisionaudit.scanner import scan

# (rule, hazard sample, clean twin, mode the hazard needs)
CASES = [
    ("PA101", "pa101_softmax_hazard.py", "pa101_softmax_clean.py", "pure"),
    ("PA102", "pa102_variance_hazard.py", "pa102_variance_clean.py", "autocast"),
    ("PA102", "pa102_groupnorm_hazard.py", "pa102_groupnorm_clean.py", "pure"),
    ("PA103", "pa103_var_hazard.py", "pa103_var_clean.py", "autocast"),
    ("PA103", "pa103_cumsum_hazard.py", "pa103_cumsum_clean.py", "pure"),
    ("PA104", "pa104_lstm_hazard.py", "pa104_lstm_clean.py", "autocast"),
    ("PA104", "pa104_recurrence_hazard.py", "pa104_recurrence_clean.py", "autocast"),
    ("PA105", "pa105_exp_hazard.py", "pa105_exp_clean.py", "pure"),
    ("PA105", "pa105_decay_hazard.py", "pa105_decay_clean.py", "pure"),
    ("PA106", "pa106_logits_hazard.py", "pa106_logits_clean.py", "autocast"),
    ("PA106", "pa106_logits_hazard.py", "pa106_prescaled_clean.py", "autocast"),
    ("PA106", "pa106_prescaled_hazard.py", "pa106_prescaled_clean.py", "autocast"),
    ("PA106", "pa106_baddbmm_hazard.py", "pa106_baddbmm_clean.py", "autocast"),
    ("PA107", "pa107_mask_hazard.py", "pa107_mask_clean.py", "autocast"),
    ("PA107", "pa107_setitem_hazard.py", "pa107_setitem_clean.py", "autocast"),
    ("PA108", "pa108_loss_hazard.py", "pa108_loss_clean.py", "pure"),
    ("PA109", "pa109_bce_hazard.py", "pa109_bce_clean.py", "autocast"),
    ("PA110", "pa110_positions_hazard.py", "pa110_positions_clean.py", "autocast"),
    ("PA111", "pa111_output_hazard.py", "pa111_output_clean.py", "autocast"),
    ("PA112", "pa112_upcast_hazard.py", "pa112_upcast_clean.py", "autocast"),
    ("PA112", "pa112_rotary_hazard.py", "pa112_rotary_clean.py", "autocast"),
    ("PA201", "pa201_gemm_hazard.py", "pa201_gemm_clean.py", "autocast"),
    ("PA202", "pa202_vocab_hazard.py", "pa202_vocab_clean.py", "autocast"),
    ("PA203", "pa203_channels_hazard.py", "pa203_channels_clean.py", "autocast"),
    ("PA204", "pa204_small_hazard.py", "pa204_small_clean.py", "autocast"),
    ("PA205", "pa205_fp32gemm_hazard.py", "pa205_fp32gemm_clean.py", "autocast"),
    ("PA115", "pa115_mixed_hazard.py", "pa115_mixed_clean.py", "pure"),
    ("PA116", "pa116_offset_norm_hazard.py", "pa116_offset_norm_clean.py", "pure"),
    ("PA116", "pa116_offset_cast_hazard.py", "pa116_offset_cast_clean.py", "autocast"),
    ("PA206", "pa206_headdim_hazard.py", "pa206_headdim_clean.py", "autocast"),
]


def rules_in(name, mode):
    return {f.rule for f in findings_of(sample(name), mode=mode)}


@pytest.mark.parametrize("rule,hazard,clean,mode", CASES, ids=[f"{c[0]}-{c[1]}" for c in CASES])
def test_hazard_fires(rule, hazard, clean, mode):
    assert rule in rules_in(hazard, mode)


@pytest.mark.parametrize("rule,hazard,clean,mode", CASES, ids=[f"{c[0]}-{c[2]}" for c in CASES])
def test_clean_twin_is_silent(rule, hazard, clean, mode):
    assert rule not in rules_in(clean, mode)


@pytest.mark.parametrize("clean", sorted({c[2] for c in CASES}))
def test_clean_twins_have_no_warnings_under_autocast(clean):
    """Idiomatic clean code (upcasts, finfo masks, SDPA, BatchNorm under autocast) is not flagged."""
    assert [f.rule for f in findings_of(sample(clean)) if f.severity != "info"] == []


def line_of(name, text):
    with open(sample(name)) as fh:
        return next(i for i, line in enumerate(fh, 1) if text in line)


def test_mask_overflow_is_an_error_on_its_line():
    found = [f for f in findings_of(sample("pa107_mask_hazard.py")) if f.rule == "PA107"]
    by_line = {f.line: f for f in found}
    mask = by_line[line_of("pa107_mask_hazard.py", "masked_fill(mask, -1e9)")]
    assert (mask.severity, mask.op, mask.evidence["status"]) == ("error", "masked_fill", "overflow")


def test_epsilon_underflow_is_a_warning():
    found = [f for f in findings_of(sample("pa107_mask_hazard.py")) if f.rule == "PA107"]
    eps = next(f for f in found if f.line == line_of("pa107_mask_hazard.py", "+ 1e-8)"))
    assert (eps.severity, eps.evidence["status"]) == ("warning", "underflow")


def test_mask_value_fits_bfloat16():
    assert "PA107" not in {f.rule for f in findings_of(sample("pa107_mask_hazard.py"), dtype="bfloat16")
                           if f.severity == "error"}


def test_softmax_severity_depends_on_dtype():
    def severity(dtype):
        return next(f.severity for f in findings_of(sample("pa101_softmax_hazard.py"), dtype=dtype,
                                                    mode="pure") if f.rule == "PA101")
    assert (severity("float16"), severity("bfloat16")) == ("error", "warning")


def test_softmax_is_fp32_under_cuda_autocast():
    assert "PA101" not in rules_in("pa101_softmax_hazard.py", "autocast")


def test_exp_is_fp32_under_cuda_autocast():
    assert "PA105" not in rules_in("pa105_exp_hazard.py", "autocast")


def test_fused_kernels_accumulating_in_fp32_are_silent_in_pure_fp16():
    """SoftMax.cu and group_norm_kernel.cu keep max/sum/mean/variance in fp32 for Half inputs."""
    graph = scanned_graph(sample("pa102_groupnorm_clean.py"), mode="pure")
    norm = next(a for _, a in graph.nodes(data=True) if a["op"] == "group_norm")
    assert (norm["compute_dtype"], norm["kernel"].accumulate_dtype) == ("float16", "float32")
    assert "group_norm_kernel.cu" in norm["kernel"].source
    graph = scanned_graph(sample("pa101_softmax_clean.py"), mode="pure")
    softmax = next(a for _, a in graph.nodes(data=True) if a["op"] == "softmax")
    assert (softmax["compute_dtype"], softmax["kernel"].accumulate_dtype) == ("float16", "float32")


def test_cumsum_accumulates_in_its_input_dtype_on_cuda_only():
    """CumsumKernel.cu scans with std::plus<scalar_t>; the CPU kernel carries acc_type."""
    def accumulate(device):
        graph = scanned_graph(sample("pa103_cumsum_hazard.py"), mode="pure", device=device)
        return next(a for _, a in graph.nodes(data=True) if a["op"] == "cumsum")["kernel"].accumulate_dtype
    assert (accumulate("cuda"), accumulate("cpu")) == ("float16", "float32")


EVAL_BN = """
import torch
from torch import nn

def get_model():
    return nn.Sequential(nn.Conv2d(8, 8, 3), nn.BatchNorm2d(8)).eval()

def get_example_inputs():
    return (torch.randn(2, 8, 8, 8),)
"""


def test_eval_mode_batch_norm_computes_no_statistics(tmp_path):
    """Eval-mode batch norm normalises with its running statistics: nothing to accumulate."""
    path = tmp_path / "eval_bn.py"
    path.write_text(EVAL_BN)
    graph = scanned_graph(str(path), mode="pure")
    norm = next(a for _, a in graph.nodes(data=True) if a["op"] == "batch_norm")
    assert norm["kernel"].computes_statistics is False


def test_handwritten_norm_message_names_the_dtype_problem():
    found = next(f for f in findings_of(sample("pa102_groupnorm_hazard.py"), mode="pure",
                                        dtype="bfloat16") if f.rule == "PA102")
    assert "65504" not in found.message and "bfloat16" in found.message


def test_variance_reported_once_per_norm():
    assert [f.rule for f in findings_of(sample("pa102_variance_hazard.py"))].count("PA102") == 1


def test_lstm_finding_names_module_and_steps():
    f = next(f for f in findings_of(sample("pa104_lstm_hazard.py")) if f.rule == "PA104")
    assert (f.module, f.evidence["steps"]) == ("rnn", 512)


def test_logits_matmul_finding_names_its_softmax():
    f = next(f for f in findings_of(sample("pa106_logits_hazard.py")) if f.rule == "PA106")
    assert (f.op, f.evidence["softmax"], f.fix["ops"]) == ("matmul", "softmax", ["matmul"])


def test_vocab_padding_suggests_50304():
    found = [f for f in findings_of(sample("pa202_vocab_hazard.py")) if f.rule == "PA202"]
    assert sorted((f.module, f.evidence["padded"]) for f in found) == [("lm_head", 50304)]


def test_vocab_is_not_also_reported_as_unaligned_gemm():
    assert "PA201" not in rules_in("pa202_vocab_hazard.py", "autocast")


def test_rgb_stem_is_info_and_body_is_warning():
    found = {f.module: f.severity for f in findings_of(sample("pa203_channels_hazard.py")) if f.rule == "PA203"}
    assert found == {"stem": "info", "body": "warning"}


def test_unaligned_gemm_reports_padding():
    found = sorted((f.module, f.evidence["size"], f.evidence["padded"])
                   for f in findings_of(sample("pa201_gemm_hazard.py")) if f.rule == "PA201")
    assert found == [("down", 100, 104), ("up", 100, 104)]


def test_positions_report_the_exact_limit():
    f = next(f for f in findings_of(sample("pa110_positions_hazard.py")) if f.rule == "PA110")
    assert (f.evidence["max_value"], f.evidence["exact_limit"]) == (4095, 2048)


def test_bf16_positions_limit_is_256():
    f = next(f for f in findings_of(sample("pa110_positions_hazard.py"), dtype="bfloat16") if f.rule == "PA110")
    assert f.evidence["exact_limit"] == 256


def test_banned_op_only_under_autocast():
    assert "PA109" not in rules_in("pa109_bce_hazard.py", "pure")


def test_ineffective_upcast_points_at_the_matmul():
    f = next(f for f in findings_of(sample("pa112_upcast_hazard.py")) if f.rule == "PA112")
    assert f.evidence["undone_op"] == "matmul"


def test_hand_written_variance_fix_covers_the_square():
    f = next(f for f in findings_of(sample("pa102_variance_hazard.py")) if f.rule == "PA102")
    assert f.fix["ops"] == ["mul", "mean"]


def test_explain_shows_what_the_kernel_accumulates_in(cli):
    result = cli("explain", sample("pa102_groupnorm_clean.py"), "--mode", "pure")
    header, row = (next(line.split() for line in result.output.splitlines() if line.startswith(p))
                   for p in ("node", "group_norm"))
    assert dict(zip(header, row))["computes"] == "fp16"
    assert dict(zip(header, row))["accumulates"] == "fp32"
    assert dict(zip(header, row))["out"] == "fp16"


def test_an_undone_upcast_of_positions_is_a_warning_past_the_dtypes_exact_integers():
    """4096 positions: past bf16's 256 and fp16's 2048 exact integers; a plain upcast stays info."""
    for dtype in ("bfloat16", "float16"):
        (f,) = [f for f in findings_of(sample("pa112_rotary_hazard.py"), dtype=dtype) if f.rule == "PA112"]
        assert (f.severity, f.evidence["max_value"]) == ("warning", 4095)
    (plain,) = [f for f in findings_of(sample("pa112_upcast_hazard.py")) if f.rule == "PA112"]
    assert plain.severity == "info"


def test_index_assignment_of_a_constant_is_an_error_on_its_line():
    """torch makes ``t[i] = 2**30`` a tensor of t's dtype before any kernel runs: the scan keeps
    the number as written and judges it in the destination's dtype."""
    found = {f.line: f for f in findings_of(sample("pa107_setitem_hazard.py")) if f.rule == "PA107"}
    expected = {"scores[:, 0] = 1e9": (1e9, "inf"), "scores[0, 1] = 2**30": (2**30, "inf"),
                "scores[~keep] = -1e9": (-1e9, "-inf")}
    for text, (value, becomes) in expected.items():
        f = found.pop(line_of("pa107_setitem_hazard.py", text))
        assert (f.severity, f.op, f.evidence["value"], f.evidence["status"]) == ("error", "setitem", value, "overflow")
        assert f.message.endswith(f"becomes {becomes} there")
        # a plan cannot change the dtype of the tensor written into: the fix is a code change
        assert (f.fix["action"], "torch.finfo(t.dtype).max" in f.fix["use"]) == ("replace", True)
    assert found == {}


SETITEM_EAGER = """
import torch
from torch import nn

class Sentinel(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(16, 16)

    def forward(self, x):
        scores = self.proj(x)
        wide = scores.float()
        wide[:, 0] = 1e9
        if x.sum() > 0:  # data-dependent: the fake run fails, the scan runs eagerly
            scores[:, 1] = 1e9
        else:
            scores[:, 2] = 1e9
        scores[:, 3] = torch.tensor(-1e9)
        return scores.float() + wide

def get_model():
    return Sentinel()

def get_example_inputs():
    return (torch.randn(4, 16),)
"""


def test_index_assignment_on_real_tensors_and_into_float32(tmp_path):
    """The eager fallback sees the same writes; a constant written into a float32 tensor fits,
    and a constant 0-d tensor (torch.tensor(-1e9)) is judged as the number it holds."""
    path = tmp_path / "sentinel.py"
    path.write_text(SETITEM_EAGER)
    for mode in ("autocast", "pure"):
        results, findings = scan([str(path)], Target("float16", mode, "cuda"), load_rules())
        assert results[0].frontend == "eager"
        found = sorted((f.line, f.evidence["value"]) for f in findings if f.rule == "PA107")
        assert [v for _, v in found] == [1e9, -1e9], mode  # not the float32 `wide` (line 13)
        assert {line for line, _ in found} < {15, 17, 18}


IN_PLACE_WRITES = """
import torch
from torch import nn

class Writes(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(16, 16)

    def forward(self, x):
        h = self.proj(x)
        big = torch.empty_like(h)
        big.fill_(1e9)
        h.index_fill_(1, torch.tensor([0]), -1e9)
        h.masked_fill_(h > 3, -1e9)
        fits = torch.empty_like(h).fill_(torch.finfo(h.dtype).max)
        return (h + big + fits + torch.zeros_like(h)).float()

def get_model():
    return Writes()

def get_example_inputs():
    return (torch.randn(4, 16),)
"""


def test_in_place_writes_of_a_constant_are_errors_a_plan_cannot_fix(tmp_path):
    """fill_ is transparent when torch makes zeros with it; the user's own fill_ is a node.
    An in-place write keeps the tensor's dtype, so an fp32 region is no fix."""
    path = tmp_path / "writes.py"
    path.write_text(IN_PLACE_WRITES)
    found = sorted((f.line, f.op, f.evidence["value"], f.fix["action"])
                   for f in findings_of(str(path)) if f.rule == "PA107")
    assert found == [(13, "fill_", 1e9, "replace"), (14, "index_fill_", -1e9, "replace"),
                     (15, "masked_fill_", -1e9, "replace")]


def test_index_assignment_fits_bfloat16():
    assert "PA107" not in {f.rule for f in findings_of(sample("pa107_setitem_hazard.py"), dtype="bfloat16")}


def test_mixed_operands_name_the_op_its_line_and_both_dtypes():
    found = {f.line: f for f in findings_of(sample("pa115_mixed_hazard.py"), mode="pure", select=("PA115",))}
    conv = found[line_of("pa115_mixed_hazard.py", "f = self.update(")]
    matmul = found[line_of("pa115_mixed_hazard.py", "@ basis")]
    assert (conv.op, conv.module, conv.severity) == ("conv2d", "update", "error")
    assert "float16 and float32 operands" in conv.message and "weight type" in conv.message
    assert matmul.op == "matmul" and "expected m1 and m2" in matmul.message
    assert len(found) == 2


def test_mixed_operands_are_cast_to_one_dtype_by_autocast():
    assert "PA115" not in rules_in("pa115_mixed_hazard.py", "autocast")


AUTOCAST_OFF = """
import torch
from torch import nn

class M(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(16, 16)

    def forward(self, x):
        h = self.proj(x)                        # float16 under autocast
        with torch.autocast("cuda", enabled=False):
            return h @ torch.eye(16)            # float16 @ float32: no autocast to cast them
%s
def get_model():
    return M()

def get_example_inputs():
    return (torch.randn(4, 16),)
"""


@pytest.mark.parametrize("data_dependent", [False, True])
def test_mixed_operands_inside_autocast_disabled_and_in_the_eager_capture(tmp_path, data_dependent):
    """A data-dependent forward is captured eagerly, where the product would raise: it is
    computed anyway, so that the capture finishes and the finding names it."""
    extra = "" if not data_dependent else """
    def forward(self, x):
        if float(x.sum()) > -1e9:               # needs values: the fake capture cannot follow
            x = x * 1
        h = self.proj(x)
        with torch.autocast("cuda", enabled=False):
            return h @ torch.eye(16)
"""
    path = tmp_path / "m.py"
    path.write_text(AUTOCAST_OFF % extra)
    report, found = scan([str(path)], Target("float16", "autocast"), load_rules())
    (model,) = report
    (f,) = [f for f in found if f.rule == "PA115"]
    assert "inside autocast(enabled=False)" in f.message and f.op == "matmul"
    assert model.frontend == ("eager" if data_dependent else "fake")
    # only the eager run had to compute it anyway (a fake GEMM does not refuse the operands)
    assert any(n.startswith("mm given float16 and float32 operands") for n in model.notes) == data_dependent


def test_an_offset_norm_scale_is_a_warning_in_bf16_and_says_how_far_apart_numbers_are():
    def found(dtype, mode="pure"):
        return [f for f in findings_of(sample("pa116_offset_norm_hazard.py"), dtype=dtype, mode=mode)
                if f.rule == "PA116"]
    (bf16,), (fp16,) = found("bfloat16"), found("float16")
    assert (bf16.severity, bf16.module, bf16.op, bf16.line) == \
        ("warning", "norm", "add", line_of("pa116_offset_norm_hazard.py", "return output * (1 + self.weight)"))
    assert "1 + norm.weight is formed in bfloat16, where numbers near 1 are 0.0078 apart" in bf16.message
    assert fp16.severity == "info" and "0.00098 apart" in fp16.message
    assert bf16.fix["ops"] == ["add", "mul"] and bf16.fix["module"] == "norm"
    assert found("bfloat16", "autocast") == []  # the weight is fp32 under autocast: so is the add


NEMOTRON_NORM = '''
import torch
from torch import nn
from transformers.models.nemotron.modeling_nemotron import NemotronLayerNorm1P


class Block(nn.Module):
    def __init__(self, d=64):
        super().__init__()
        self.proj = nn.Linear(d, d)
        self.norm = NemotronLayerNorm1P(d)

    def forward(self, x):
        return self.norm(self.proj(x)).float()


def get_model():
    return Block()


def get_example_inputs():
    return (torch.randn(2, 8, 64),)
'''


def test_nemotron_layernorm1p_scale_is_rounded_by_its_own_autocast_cast(tmp_path):
    """transformers' NemotronLayerNorm1P forms ``weight + 1.0`` in fp32, then its
    ``_cast_if_autocast_enabled`` casts it to bf16 before ``F.layer_norm``: a learned offset of
    0.003 is gone (1.003 is 1.0 in bf16). Only the whole module in fp32 (autocast off, so the
    model's own branch does not cast) keeps it, and that is the fix."""
    pytest.importorskip("transformers")
    assert torch.tensor(1.003).bfloat16().item() == 1.0
    path = tmp_path / "nemotron_norm.py"
    path.write_text(NEMOTRON_NORM)
    (found,) = [f for f in findings_of(str(path), dtype="bfloat16") if f.rule == "PA116"]
    assert (found.severity, found.module, found.op) == ("warning", "norm", "add")
    assert "formed in float32, then cast to bfloat16 before the layer_norm" in found.message
    assert found.fix["ops"] == [] and found.fix["module"] == "norm"
