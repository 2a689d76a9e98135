"""``check --train`` and ``plan --train`` from the command line: the report, the exit codes,
and a plan written from the findings that makes the check pass."""
import json
import textwrap

import pytest
from conftest import sample

NORM = sample("pa304_norm_hazard.py")
PURE_BF16 = ("--dtype", "bfloat16", "--mode", "pure", "--steps", "10")


def test_a_failing_training_check_names_the_module_and_exits_1(cli):
    result = cli("check", NORM, "--train", *PURE_BF16)
    assert result.exit_code == 1, result.output
    assert "PA304 [error] norm:" in result.output
    assert "baseline   diverges" in result.output and "FAILED: the baseline variant diverges" in result.output


def test_the_json_report_is_the_train_report(cli):
    document = json.loads(cli("check", NORM, "--train", *PURE_BF16, "--format", "json").stdout)
    assert document["train"] is True and document["steps"] == 10 and document["passed"] is False
    assert [v["name"] for v in document["variants"]] == ["reference", "baseline"]
    assert {(f["rule"], f["module"]) for f in document["findings"]} == {("PA304", "norm")}


def test_plan_train_writes_the_entries_that_make_the_check_pass(cli, tmp_path):
    plan = tmp_path / "amp_plan.yaml"
    written = cli("plan", NORM, "--train", *PURE_BF16, "-o", plan)
    assert written.exit_code == 0, written.output
    assert "keep_fp32_modules: [norm]" in plan.read_text()
    proved = cli("check", NORM, "--train", *PURE_BF16, "--plan", plan)
    assert proved.exit_code == 0, proved.output
    assert "PASSED: the planned variant is within tolerance" in proved.output


@pytest.mark.parametrize("args,message", [
    (("--steps", "0"), "--steps must be a whole number of at least 1"),
    (("--grad",), "check --train takes neither --grad"),
])
def test_bad_training_options_are_one_line_and_exit_2(cli, tmp_path, args, message):
    result = cli("check", NORM, "--train", *args)
    assert result.exit_code == 2
    assert message in result.output and "Traceback" not in result.output


def test_an_onnx_model_cannot_be_trained(cli, tmp_path):
    model = tmp_path / "m.onnx"
    model.write_bytes(b"not read")
    result = cli("check", model, "--train")
    assert result.exit_code == 2
    assert "check --train trains PyTorch model files" in result.output


MODEL = textwrap.dedent("""\
    import math

    import torch


    def get_model():
        return torch.nn.Linear(8, 4)


    def get_example_inputs():
        return (torch.randn(4, 8),)
    """)


@pytest.mark.parametrize("extra,message", [
    ("def get_optimizer(params):\n    raise RuntimeError('no optimizer today')\n",
     "get_optimizer(params) raised RuntimeError: no optimizer today"),
    ("def get_optimizer(params):\n    return 'adamw'\n", "get_optimizer(params) returned str, not an optimizer"),
    ("def get_loss(outputs, inputs):\n    return outputs.float()\n", "the loss is not a scalar (shape (4, 4)"),
    ("def get_loss(outputs, inputs):\n    return outputs.float().mean() * math.nan\n",
     "the fp32 reference diverges (its loss is inf/NaN at step 0): not a precision problem"),
    ("def get_model():\n    return torch.nn.Linear(8, 4).requires_grad_(False)\n", "no trainable parameters"),
])
def test_bad_training_code_is_one_line_and_exit_2(cli, tmp_path, extra, message):
    model = tmp_path / "model.py"
    model.write_text(MODEL + "\n\n" + extra)
    result = cli("check", model, "--train", "--steps", "2")
    assert result.exit_code == 2, result.output
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert "Traceback" not in result.output


@pytest.mark.parametrize("passed,status,line", [
    (False, "diverges", "FAILED: the baseline variant diverges"),
    (False, "exceeds_tolerance", "FAILED: the baseline variant is out of tolerance"),
    (False, "nonfinite", "FAILED: the baseline variant went non-finite (inf/NaN)"),
    (False, "error", "FAILED: the baseline variant raised an error"),
    (True, "ok", "PASSED: the baseline variant is within tolerance"),
])
def test_every_status_of_check_and_check_train_reads_as_a_sentence(passed, status, line):
    """The verdict words of check, check --train and their pages (report/words.py)."""
    from precisionaudit.report.check_report import render_text
    from precisionaudit.report.train_report import render_train_text
    from precisionaudit.report.words import verdict

    assert verdict(passed, "baseline", status) == line
    variant = {"name": "baseline", "status": status, "loss": [1.0], "outputs": [],
               "error": "boom" if status == "error" else None}
    train = {"path": "m.py", "steps": 1, "lr": 1e-4, "target": {"dtype": "float16", "mode": "pure", "device": "cuda"},
             "device": "cpu", "variants": [variant], "findings": [], "passed": passed}
    assert line in render_train_text(train)
    if not passed and status != "diverges":  # check --train's own status; check's are the others
        check = {"path": "m.py", "entry": "get_model", "target": train["target"], "device": "cpu",
                 "tolerance": {"atol": 0.01, "rtol": 0.01, "cosine": 0.999},
                 "executions": {"forward": 2, "backward": 0},
                 "wall_s": 0.1, "variants": [variant], "passed": False}
        assert render_text(check).rstrip().endswith(line)
