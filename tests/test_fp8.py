"""The FP8 target (--dtype float8): bf16 autocast plus FP8 Linears, the eligibility pass
(analysis/fp8.py) and its rules PA601-PA603."""
import json

import pytest
import torch
from conftest import sample
from click.testing import CliRunner

from precisionaudit.cli import main
from precisionaudit.core.numerics import FP8_FORMATS
from precisionaudit.core.target import Target
from precisionaudit.plan.pytorch import make_plan
from precisionaudit.rules.engine import load_rules
from precisionaudit.scanner import scan

FP8 = Target.named("float8")

CASES = [
    ("PA601", "pa601_fp8_dims_hazard.py", "pa601_fp8_dims_clean.py"),
    ("PA602", "pa602_fp8_head_hazard.py", "pa602_fp8_head_clean.py"),
    ("PA603", "pa603_fp8_tiny_hazard.py", "pa603_fp8_tiny_clean.py"),
]


def _scan(name, target=FP8, select=None):
    rules = [r for r in load_rules() if select is None or r.id in select]
    results, found = scan([sample(name)], target, rules)
    assert results[0].status == "ok", results[0].error
    return results[0], found


def _fp8_facts(name, recipe="tensorwise"):
    result, _ = _scan(name, Target.named("float8", recipe=recipe), select=())
    return {a["module"]: a["fp8"] for _, a in result.graph.nodes(data=True) if "fp8" in a}


def test_float8_is_bf16_autocast_with_a_recipe_and_keeps_other_targets_json_unchanged():
    assert FP8 == Target("bfloat16", "autocast", "cuda", "tensorwise")
    assert FP8.as_dict() == {"dtype": "float8", "recipe": "tensorwise", "mode": "autocast", "device": "cuda"}
    assert Target.named("bfloat16").as_dict() == {"dtype": "bfloat16", "mode": "autocast", "device": "cuda"}
    with pytest.raises(ValueError, match="--recipe needs --dtype float8"):
        Target.named("float16", recipe="rowwise")
    with pytest.raises(ValueError, match="no --mode pure"):
        Target.named("float8", mode="pure")


def test_fp8_formats_are_torch_finfo():
    for name, facts in FP8_FORMATS.items():
        info = torch.finfo(getattr(torch, name))
        assert facts["max"] == info.max
        assert facts["smallest_normal"] == info.smallest_normal
        assert facts["smallest_subnormal"] == info.smallest_normal * info.eps
        assert facts["unit_roundoff"] == info.eps / 2


@pytest.mark.parametrize("rule,hazard,clean", CASES, ids=[c[0] for c in CASES])
def test_hazard_fires_under_float8_only_and_the_clean_twin_is_silent(rule, hazard, clean):
    _, found = _scan(hazard)
    hits = [f for f in found if f.rule == rule]
    assert hits
    for f in hits:  # strict templates: every placeholder filled with a real value
        assert "{" not in f.message + " ".join(str(v) for v in f.fix.values())
    assert rule not in {f.rule for f in _scan(hazard, Target.named("bfloat16"))[1]}
    assert rule not in {f.rule for f in _scan(clean)[1]}


def test_clean_twins_have_no_warnings_under_float8():
    for _, _, clean in CASES:
        assert [f.rule for f in _scan(clean)[1] if f.severity != "info"] == []


def test_unaligned_mlp_falls_back_to_bf16_with_the_padded_size():
    facts = _fp8_facts("pa601_fp8_dims_hazard.py")
    up = facts["block.up"]
    assert (up.runs_fp8, up.k, up.n, up.padded_n) == (False, 1024, 4100, 4112)
    assert "divisible by 16" in up.fallback
    _, found = _scan("pa601_fp8_dims_hazard.py", select={"PA601"})
    assert any("4112x1024" in f.message and "bf16" in f.message for f in found)
    assert {f.severity for f in found} == {"warning"}


def test_an_unaligned_output_head_is_info_and_not_told_to_pad(tmp_path):
    """A 1000-class head stays bf16, as the guidance wants: PA601 only notes it, without the
    padding advice, while an unaligned hidden layer is a warning that says the padded size."""
    text = open(sample("pa602_fp8_head_hazard.py")).read()
    model = tmp_path / "head1000.py"
    model.write_text(text.replace("nn.Linear(d, vocab, bias=False)", "nn.Linear(d, 1000, bias=False)"))
    results, found = scan([str(model)], FP8, [r for r in load_rules() if r.id in ("PA601", "PA602")])
    assert results[0].status == "ok", results[0].error
    (head,) = found
    assert (head.rule, head.severity, head.module) == ("PA601", "info", "lm_head")
    assert "belongs in bf16" in head.message and "pad it" not in head.message
    # converted unfiltered, _scaled_mm refuses N=1000 on a GPU: the plan keeps it out all the same
    plan, _ = make_plan(found, FP8)
    assert plan.keep_out_of_fp8 == ["lm_head"]


def test_mxfp8_needs_multiples_of_32():
    """4112 = 16 * 257: FP8 under tensorwise, not under MXFP8's 32-element blocks."""
    assert _fp8_facts("pa601_fp8_dims_clean.py")["block.up"].runs_fp8
    mx = _fp8_facts("pa601_fp8_dims_clean.py", recipe="mxfp8")["block.up"]
    assert not mx.runs_fp8 and mx.multiple == 32 and mx.padded_n == 4128


def test_head_tied_and_functional_heads():
    """The nn.Linear head is the output head; the final MLP projection (added back into the
    residual stream) is not; an F.linear head on the embedding is no module to convert."""
    facts = _fp8_facts("pa602_fp8_head_hazard.py")
    assert facts["lm_head"].output_head and facts["lm_head"].runs_fp8
    assert not facts["block.down"].output_head
    functional = _fp8_facts("pa602_fp8_head_clean.py")[""]
    assert not functional.runs_fp8 and "F.linear" in functional.fallback


def test_tiny_gemm_threshold_is_the_rules_param():
    rule = next(r for r in load_rules() if r.id == "PA603")
    assert rule.params["max_weight_elements"] == 2048 * 1024
    _, found = _scan("pa603_fp8_tiny_hazard.py", select={"PA603"})
    assert {(f.module, f.severity) for f in found} == {("block.up", "info"), ("block.down", "info")}


def test_scan_json_names_the_float8_target(tmp_path):
    out = tmp_path / "r.json"
    result = CliRunner().invoke(main, ["scan", sample("pa602_fp8_head_hazard.py"), "--dtype", "float8",
                                       "--recipe", "rowwise", "--format", "json", "-o", str(out), "--exit-zero"])
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text())
    assert report["target"] == {"dtype": "float8", "recipe": "rowwise", "mode": "autocast", "device": "cuda"}
    assert "PA602" in {f["rule"] for f in report["findings"]}


@pytest.mark.parametrize("args,message", [
    (["--recipe", "rowwise"], "--recipe needs --dtype float8"),
    (["--dtype", "float8", "--mode", "pure"], "no --mode pure"),
])
def test_bad_target_flags_are_one_line_and_exit_2(args, message):
    result = CliRunner().invoke(main, ["scan", sample("pa602_fp8_head_clean.py"), *args])
    assert result.exit_code == 2 and message in result.output and "Traceback" not in result.output


def test_check_takes_float8_and_runs_the_fp8_variant():
    """check --dtype float8 emulates FP8 (tests/test_check_fp8.py holds the numerics)."""
    result = CliRunner().invoke(main, ["check", sample("pa602_fp8_head_clean.py"), "--dtype", "float8",
                                       "--format", "json"])
    report = json.loads(result.stdout)
    assert report["target"]["dtype"] == "float8" and report["variants"][-1]["fp8"]["recipe"] == "tensorwise"
    assert [v["name"] for v in report["variants"]] == ["reference", "bfloat16", "baseline"]


def test_explain_shows_each_linear_in_fp8_or_bf16_and_why():
    result = CliRunner().invoke(main, ["explain", sample("pa601_fp8_dims_hazard.py"), "--dtype", "float8"])
    assert result.exit_code == 0, result.output
    table = result.output.split("FP8 GEMMs under --recipe tensorwise, per Linear GEMM:")[1].splitlines()
    rows = {line.split()[1]: line for line in table[2:] if line.strip()}
    assert "bf16" in rows["block.up"] and "divisible by 16" in rows["block.up"]
    assert "F.linear outside an nn.Linear module" in rows["<root>"]
    plain = CliRunner().invoke(main, ["explain", sample("pa601_fp8_dims_hazard.py"), "--dtype", "bfloat16"])
    assert "FP8 GEMMs" not in plain.output


def test_plan_lists_the_linears_to_keep_out_of_fp8_and_reads_back(tmp_path):
    from precisionaudit.plan.file import load_plan

    out = tmp_path / "plan.yaml"
    result = CliRunner().invoke(main, ["plan", sample("pa602_fp8_head_hazard.py"), "--dtype", "float8",
                                       "--isolated", "-o", str(out)])
    assert result.exit_code == 0, result.output
    text = out.read_text()
    assert "module_filter_fn=lambda mod, fqn: fqn not in KEEP_BF16" in text and "KEEP_BF16 = {'lm_head'}" in text
    plan = load_plan(str(out))
    assert plan.keep_out_of_fp8 == ["lm_head"] and plan.overrides == []
    assert plan.target == {"dtype": "float8", "recipe": "tensorwise", "mode": "autocast", "device": "cuda"}
    # the pasted filter keeps exactly that module in bf16
    namespace = {}
    exec("KEEP_BF16 = " + text.split("#     KEEP_BF16 = ")[1].splitlines()[0], namespace)
    assert namespace["KEEP_BF16"] == {"lm_head"}


def test_a_plan_without_the_fp8_section_still_loads_and_a_bad_one_is_refused():
    from precisionaudit.plan.file import PlanError, load_plan

    assert load_plan({"version": 1, "target": {"dtype": "float16"}, "overrides": []}).keep_out_of_fp8 == []
    with pytest.raises(PlanError, match="keep_out_of_fp8 must be a list"):
        load_plan({"version": 1, "keep_out_of_fp8": "lm_head"})


def test_a_conv1d_style_addmm_is_a_bf16_fallback_that_pa601_does_not_ask_to_pad(tmp_path):
    """Hugging Face's Conv1D (GPT-2) computes addmm(bias, x, W) with W as (in, out): no
    library converts it, and padding it would not change that."""
    model = tmp_path / "conv1d.py"
    model.write_text(
        "import torch\nfrom torch import nn\n\n\n"
        "class Conv1D(nn.Module):\n"
        "    def __init__(self, nx, nf):\n"
        "        super().__init__()\n"
        "        self.weight = nn.Parameter(torch.randn(nx, nf))\n"
        "        self.bias = nn.Parameter(torch.zeros(nf))\n\n"
        "    def forward(self, x):\n"
        "        return torch.addmm(self.bias, x.view(-1, x.size(-1)), self.weight)\n\n\n"
        "class M(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.c_fc = Conv1D(1024, 4100)\n"
        "        self.out = nn.Linear(4100, 1024)\n\n"
        "    def forward(self, x):\n"
        "        return x + self.out(self.c_fc(x)).view(x.shape)\n\n\n"
        "def get_model():\n    return M()\n\n\n"
        "def get_example_inputs():\n    return (torch.randn(32, 1024),)\n")
    results, found = scan([str(model)], FP8, load_rules())
    facts = {a["module"]: a["fp8"] for _, a in results[0].graph.nodes(data=True) if "fp8" in a}
    assert (facts["c_fc"].k, facts["c_fc"].n, facts["c_fc"].convertible) == (1024, 4100, False)
    assert "not an nn.Linear" in facts["c_fc"].fallback
    assert {f.module for f in found if f.rule == "PA601"} == {"out"}


def test_an_onnx_file_under_float8_is_one_line_before_any_model_is_scanned(tmp_path):
    import shutil

    import onnx
    from onnx import TensorProto, helper

    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])])
    onnx.save(helper.make_model(graph), str(tmp_path / "m.onnx"))
    shutil.copy(sample("pa602_fp8_head_hazard.py"), tmp_path / "model.py")
    result = CliRunner().invoke(main, ["scan", str(tmp_path), "--dtype", "float8", "--isolated"])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert result.output.count("\n") == 1 and "m.onnx: --dtype float8 judges PyTorch models" in result.output
