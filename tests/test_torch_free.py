"""ONNX-only commands and the core vocabulary run where torch cannot be imported.

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
import onnx  # noqa: E402
from onnx_graphs import masked_attention  # noqa: E402

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


def test_core_imports_without_torch():
    names = [f"precisionaudit.core.{m.name}" for m in pkgutil.iter_modules(precisionaudit.core.__path__)]
    assert len(names) >= 6
    result = subprocess.run([sys.executable, "-c", NO_TORCH + f"import {', '.join(names)}"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
