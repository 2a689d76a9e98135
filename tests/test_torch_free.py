"""ONNX-only commands (scan, plan, convert, check) and the core vocabulary run where torch
cannot be imported.

torch is a 1-2 s import and an install the onnx extra does not need. Each command runs in
a fresh interpreter whose ``sys.meta_path`` refuses ``torch``: a command that reaches for
it fails there, as it would on a machine without torch.
"""
import json
import pkgutil
import subprocess
import sys

import pytest

pytest.importorskip("onnxconverter_common")
import numpy as np  # noqa: E402
import onnx  # noqa: E402
from onnx_graphs import exp_softmax_by_hand, masked_attention  # noqa: E402

import precisionaudit.core  # noqa: E402

NO_TORCH = """
import sys

class NoTorch:
    '''Refuses torch and its submodules as a machine without torch would.'''
    def find_spec(self, name, path=None, target=None):
        if name == "torch" or name.startswith("torch."):
            raise ModuleNotFoundError(f"No module named {name!r} (blocked)", name=name)
        return None

sys.meta_path.insert(0, NoTorch())
"""

RUN_CLI = NO_TORCH + """
from precisionaudit.cli import main
main(sys.argv[1:], prog_name="precisionaudit")
"""


def run_cli(*args) -> subprocess.CompletedProcess:
    """One CLI run in a fresh interpreter that cannot import torch."""
    return subprocess.run([sys.executable, "-c", RUN_CLI, *map(str, args)], capture_output=True,
                          text=True, timeout=120)


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    """Where(mask, -1e9, q @ k^T) → Softmax: the -1e9 fill is inf in float16."""
    return masked_attention(tmp_path_factory.mktemp("torch_free"))


def test_the_blocker_really_blocks_torch():
    result = subprocess.run([sys.executable, "-c", NO_TORCH + "import torch"], capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 1 and "No module named 'torch' (blocked)" in result.stderr


def test_plan_error_and_load_plan_are_importable_without_torch():
    code = NO_TORCH + ("from precisionaudit import PlanError, load_plan\n"
                       "try:\n    load_plan({'version': 99})\nexcept PlanError as exc:\n    print('refused:', exc)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0 and result.stdout.startswith("refused:"), result.stderr


def test_scanning_an_onnx_model_runs_without_torch(model):
    result = run_cli("scan", "--isolated", "--format", "json", model)
    assert result.returncode == 1, result.stderr
    report = json.loads(result.stdout)
    assert report["models"][0]["status"] == "ok" and report["models"][0]["frontend"] == "onnx"
    by_rule = {f["rule"]: f for f in report["findings"]}
    assert by_rule["PA107"]["node"] == "/attn/Where" and by_rule["PA107"]["severity"] == "error"
    assert by_rule["PA101"]["node"] == "/attn/Softmax"


def test_text_scan_of_an_onnx_model_runs_without_torch(model):
    result = run_cli("scan", "--isolated", model)
    assert result.returncode == 1, result.stderr
    assert "PA107 [error] unrepresentable-constant" in result.stdout
    assert "-1e+09" in result.stdout


def test_planning_an_onnx_model_runs_without_torch(model, tmp_path):
    plan = tmp_path / "plan.yaml"
    result = run_cli("plan", "--isolated", model, "-o", plan)
    assert result.returncode == 0, result.stderr
    assert "/attn/Where" in plan.read_text() and "/attn/Softmax" in plan.read_text()


def test_converting_an_onnx_model_runs_without_torch(model, tmp_path):
    output = tmp_path / "m16.onnx"
    result = run_cli("convert", model, "-o", output)
    assert result.returncode == 0, result.stderr
    converted = onnx.load(str(output))
    assert converted.graph.input[0].type.tensor_type.elem_type == onnx.TensorProto.FLOAT16


@pytest.fixture(scope="module")
def gate(tmp_path_factory):
    """x @ w / 0.1 → Exp → sum → Div: Exp overflows float16 for standard normal x (the
    generated inputs), not for x a hundred times smaller."""
    return exp_softmax_by_hand(tmp_path_factory.mktemp("torch_free_check"))


def test_checking_an_onnx_model_runs_without_torch(gate):
    result = run_cli("check", "--isolated", "--format", "json", gate)
    assert result.returncode == 1, result.stderr
    report = json.loads(result.stdout)
    assert report["device"] == "onnxruntime-cpu" and report["passed"] is False
    reference, baseline = report["variants"]
    assert reference["status"] == "ok" and baseline["status"] == "nonfinite"
    assert baseline["first_divergence"]["node"] == "/gate/Exp"
    assert baseline["outputs"][0]["nonfinite"] > 0


def test_checking_an_onnx_model_with_its_plan_and_an_html_page_runs_without_torch(gate, tmp_path):
    pytest.importorskip("plotly")
    plan, page = tmp_path / "plan.yaml", tmp_path / "check.html"
    assert run_cli("plan", "--isolated", gate, "-o", plan).returncode == 0
    result = run_cli("check", "--isolated", gate, "--plan", plan, "--html", page)
    assert result.returncode == 0, result.stderr
    assert "passed" in result.stdout.splitlines()[-1]
    html = page.read_text()
    assert html.startswith("<!DOCTYPE html>") and "gate · exp" in html and "planned" in html


def test_checking_an_onnx_model_on_calibration_batches_runs_without_torch(gate, tmp_path):
    """The report is the first failing batch's: batch 0 (small values) passes, batch 1 fails."""
    rng = np.random.default_rng(0)
    small, large = (rng.standard_normal((32, 16)).astype(np.float32) * s for s in (0.01, 1.0))
    data = tmp_path / "batches.npz"
    np.savez(data, **{"0.x": small, "1.x": large})
    result = run_cli("check", "--isolated", "--format", "json", gate, "--data", data)
    assert result.returncode == 1, result.stderr
    report = json.loads(result.stdout)
    assert report["batch"] == 1 and report["variants"][1]["status"] == "nonfinite"
    assert report["inputs"]["x"]["values"] == "--data"


def test_explaining_and_prune_planning_an_onnx_model_run_without_torch(gate, tmp_path):
    result = run_cli("explain", gate)
    assert result.returncode == 0, result.stderr
    assert "/gate/Exp" in result.stdout
    plan = tmp_path / "pruned.yaml"
    result = run_cli("plan", "--isolated", "--prune", gate, "-o", plan)  # runs onnxruntime: the check stage
    assert result.returncode == 0, result.stderr
    assert "/gate/Exp" in plan.read_text()


def test_core_imports_without_torch():
    names = [f"precisionaudit.core.{m.name}" for m in pkgutil.iter_modules(precisionaudit.core.__path__)]
    assert len(names) >= 6
    result = subprocess.run([sys.executable, "-c", NO_TORCH + f"import {', '.join(names)}"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
