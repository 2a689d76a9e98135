"""precisionaudit check: fp32 vs AMP vs AMP+plan on the check_* demonstrations, and bad input."""
import json
import math
import textwrap

import pytest
from conftest import sample

DEMOS = [
    # sample, mode, baseline status, first divergence (module, op)
    ("check_mask_fill.py", "autocast", "error", ("blocks.0.attn", "masked_fill")),
    ("check_exp_overflow.py", "pure", "nonfinite", ("gate", "exp")),
    ("check_variance.py", "autocast", "exceeds_tolerance", ("blocks.0.norm", "mul")),
    ("check_clean.py", "autocast", "ok", None),
]


def check_json(cli, *args):
    result = cli("check", *args, "--format", "json")
    return result, json.loads(result.stdout) if result.stdout.startswith("{") else None


@pytest.mark.parametrize("name,mode,baseline,divergence", DEMOS)
def test_the_generated_plan_makes_each_demo_pass(cli, tmp_path, name, mode, baseline, divergence):
    plan = tmp_path / "amp_plan.yaml"
    assert cli("plan", sample(name), "--mode", mode, "-o", plan).exit_code == 0
    result, report = check_json(cli, sample(name), "--mode", mode, "--plan", plan)
    base, planned = report["variants"][1:]
    first = base["first_divergence"]
    assert (base["status"], (first["module"], first["op"]) if first else None) == (baseline, divergence)
    assert planned["status"] == "ok" and report["passed"] and result.exit_code == 0
    assert planned["plan"]["gemm_flops_low_precision"] >= 0.9
    assert report["executions"] == {"forward": 3, "backward": 0} and report["device"] == "cpu-emulated"


@pytest.mark.parametrize("device", ["cpu-emulated", "auto"])
def test_device_named_on_the_command_line_runs_cuda_policy(cli, device):
    """--device cpu-emulated (and an explicit auto) once reached the settings as a policy device
    and ended in an internal error; they are where the check runs, CUDA's policy either way."""
    result, report = check_json(cli, sample("check_clean.py"), "--device", device)
    assert result.exit_code == 0, result.output
    assert report["target"]["device"] == "cuda"
    if device == "cpu-emulated":
        assert report["device"] == "cpu-emulated"


def test_without_a_plan_the_baseline_is_the_verdict(cli):
    result, report = check_json(cli, sample("check_mask_fill.py"))
    assert [v["name"] for v in report["variants"]] == ["reference", "baseline"]
    assert result.exit_code == 1 and report["passed"] is False
    assert "overflow" in report["variants"][1]["error"]
    assert report["variants"][1]["gemm_flops_low_precision"] is None  # it stopped half-way


def test_text_report_says_where_the_baseline_diverges(cli):
    result = cli("check", sample("check_variance.py"))
    assert result.exit_code == 1
    assert "first divergence: blocks.0.norm · mul (" in result.stdout and "error growth" in result.stdout


def test_grad_reports_gradient_error_underflow_and_a_safe_power_of_two_loss_scale(cli, tmp_path):
    plan = tmp_path / "amp_plan.yaml"
    cli("plan", sample("check_variance.py"), "-o", plan)
    result, report = check_json(cli, sample("check_variance.py"), "--plan", plan, "--grad")
    g = report["gradients"]
    scale = g["recommended_init_scale"]
    assert report["executions"] == {"forward": 3, "backward": 3}
    assert math.log2(scale).is_integer() and g["max_abs"] * scale < 65504 <= g["max_abs"] * scale * 2
    under = g["underflow_fp16"]
    assert under["scale_1"]["zero"] > under["recommended"]["zero"]
    base, planned = report["variants"][1:]
    assert base["gradients"]["nonfinite"] > 0 and planned["gradients"]["nonfinite"] == 0
    assert planned["gradients"]["cosine"] > 0.99


def test_a_missing_plan_file_is_one_line_and_exit_2(cli):
    result = cli("check", sample("check_clean.py"), "--plan", "nowhere.yaml")
    assert result.exit_code == 2 and result.stderr == "precisionaudit: error: nowhere.yaml: no such plan file\n"


@pytest.mark.parametrize("text,message", [
    ("version: 2\noverrides: []\n", "plan version 2 is not supported"),
    ("version: 1\noverrides:\n  - {module: x, ops: []}\n", "overrides[0] (module 'x'): ops must be"),
    ("version: 1\noverrides: [\n", "not valid YAML"),
])
def test_a_bad_plan_is_one_line_and_exit_2(cli, tmp_path, text, message):
    plan = tmp_path / "amp_plan.yaml"
    plan.write_text(text)
    result = cli("check", sample("check_clean.py"), "--plan", plan)
    assert result.exit_code == 2 and result.stderr.count("\n") == 1 and message in result.stderr


def test_a_plan_for_another_dtype_is_applied_with_a_warning(cli, tmp_path):
    plan = tmp_path / "amp_plan.yaml"
    plan.write_text("version: 1\ntarget: {dtype: bfloat16, mode: autocast}\noverrides: []\n")
    result, report = check_json(cli, sample("check_clean.py"), "--plan", plan)
    assert result.exit_code == 0 and "dtype bfloat16 (not float16)" in result.stderr
    assert report["warnings"] and report["variants"][-1]["name"] == "planned"


def _model(tmp_path, forward: str, inputs: str = "(torch.randn(4, 8),)"):
    path = tmp_path / "model.py"
    path.write_text(textwrap.dedent(f"""
        import torch
        from torch import nn

        class M(nn.Module):
            def __init__(self):
                super().__init__()
                self.lin = nn.Linear(8, 8)

            def forward(self, x):
                {forward}

        def get_model():
            return M()

        def get_example_inputs():
            return {inputs}
    """))
    return path


def test_a_non_finite_fp32_reference_is_reported_as_broken(cli, tmp_path):
    result = cli("check", _model(tmp_path, "return self.lin(x) / 0.0"))
    assert result.exit_code == 2 and "the fp32 reference itself is broken: output 0 has" in result.stderr


def test_a_reference_that_raises_is_exit_2(cli, tmp_path):
    result = cli("check", _model(tmp_path, "raise ValueError('bad shapes')"))
    assert result.exit_code == 2 and "fp32 reference run failed (ValueError: bad shapes)" in result.stderr


def test_outputs_that_cannot_be_compared_are_reported_per_output(cli, tmp_path):
    path = _model(tmp_path, "y = self.lin(x); return {'y': y, 'ids': y.argmax(-1), 'note': 'text'}")
    result, report = check_json(cli, path)
    outputs = {o["name"]: o for o in report["variants"][1]["outputs"]}
    assert outputs["y"]["status"] == "ok" and result.exit_code == 0
    assert outputs["ids"]["status"] == outputs["note"]["status"] == "incomparable"
    assert "int64 tensor" in outputs["ids"]["reason"] and "str" in outputs["note"]["reason"]


def test_a_model_without_floating_outputs_has_nothing_to_compare(cli, tmp_path):
    result = cli("check", _model(tmp_path, "return self.lin(x).argmax(-1)"))
    assert result.exit_code == 2 and "no output is a floating-point tensor" in result.stderr


def test_a_model_without_example_inputs_cannot_be_checked(cli, tmp_path):
    path = _model(tmp_path, "return self.lin(x)")
    path.write_text(path.read_text().replace("def get_example_inputs", "def other_inputs"))
    result = cli("check", path)
    assert result.exit_code == 2 and "check needs example inputs: no function get_example_inputs()" in result.stderr


def test_the_loss_scale_accounts_for_intermediate_gradients(cli, tmp_path):
    # d loss / d (lin(x) * 0.01) is 100x any module output's or parameter's gradient
    result, report = check_json(cli, _model(tmp_path, "return self.lin(x) * 0.01 * 100"), "--grad")
    assert result.exit_code == 0 and report["variants"][1]["gradients"]["nonfinite"] == 0


@pytest.mark.parametrize("command", ["plan", "check"])
def test_unreadable_onnx_models_are_refused_with_one_line(cli, tmp_path, command):
    model = tmp_path / "model.onnx"
    model.write_bytes(b"\x08\x07")
    result = cli(command, model)
    assert result.exit_code == 2 and result.stderr.count("\n") == 1 and "not a readable ONNX model" in result.stderr
