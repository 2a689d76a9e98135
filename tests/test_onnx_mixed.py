"""ONNX files that are mixed precision already (written by convert, ModelOpt or by hand) are
judged as their dtypes are, not as if the whole graph were converted again; plan, convert and
check need the float32 model and say so; explain says the mode scan judges in."""
import json

import pytest

pytest.importorskip("onnx")
import yaml  # noqa: E402
from onnx import TensorProto, helper  # noqa: E402
from onnx_graphs import build, exp_softmax_by_hand, masked_attention, save, tensor  # noqa: E402

FP16 = TensorProto.FLOAT16


def _rules(cli, path):
    result = cli("scan", "--isolated", "--format", "json", path)
    assert result.exit_code in (0, 1), result.stderr
    report = json.loads(result.stdout)
    return {f["rule"] for f in report["findings"]}, report


@pytest.mark.parametrize("graph", [exp_softmax_by_hand, masked_attention])
@pytest.mark.parametrize("keep_io", [True, False])
def test_the_file_convert_wrote_does_not_report_what_its_plan_fixed(cli, tmp_path, graph, keep_io):
    source = graph(tmp_path)
    before, _ = _rules(cli, source)
    assert cli("plan", "--isolated", source, "-o", tmp_path / "plan.yaml").exit_code == 0
    fixed = {r for o in yaml.safe_load((tmp_path / "plan.yaml").read_text())["overrides"] for r in o["rules"]}
    assert fixed and fixed <= before
    args = ["--keep-io-types"] if keep_io else []
    assert cli("convert", source, "--plan", tmp_path / "plan.yaml", "-o", tmp_path / "out.onnx",
               *args).exit_code == 0
    after, report = _rules(cli, tmp_path / "out.onnx")
    assert not after & fixed
    assert "judged as the dtypes in the file are" in report["models"][0]["notes"][0]
    # the output is float32 with --keep-io-types: it does not "leave in float16"; without, it does
    assert ("PA111" in after) is (not keep_io)


def _softmax(tmp_path, upcast: bool) -> str:
    """A float16 input into a Softmax, with (clean) or without (hazard) a Cast to float32."""
    nodes = [helper.make_node("Cast", ["x"], ["x32"], to=TensorProto.FLOAT, name="/up")] if upcast else []
    nodes.append(helper.make_node("Softmax", ["x32" if upcast else "x"], ["y"], axis=-1, name="/Softmax"))
    out = tensor("y", [4, 8], TensorProto.FLOAT if upcast else FP16)
    return save(build(nodes, [tensor("x", [4, 8], FP16)], [out]), tmp_path, f"softmax_{upcast}.onnx")


def test_a_hand_made_mixed_file_is_judged_as_its_dtypes_are(cli, tmp_path):
    hazard, _ = _rules(cli, _softmax(tmp_path, upcast=False))
    clean, _ = _rules(cli, _softmax(tmp_path, upcast=True))
    assert "PA101" in hazard and "PA111" in hazard
    assert "PA101" not in clean and "PA111" not in clean


def test_plan_convert_and_check_need_the_float32_model(cli, tmp_path):
    source = exp_softmax_by_hand(tmp_path)
    assert cli("convert", source, "--keep-io-types", "-o", tmp_path / "fp16.onnx").exit_code == 0
    converted = str(tmp_path / "fp16.onnx")
    check = cli("check", converted)
    assert check.exit_code == 2 and "FAILED" not in check.stdout
    assert "already has float16 tensors" in check.stderr and "needs the float32 model" in check.stderr
    plan = cli("plan", converted, "-o", tmp_path / "p.yaml")
    assert plan.exit_code == 2 and "plan the float32 model" in plan.stderr
    assert not (tmp_path / "p.yaml").exists()
    again = cli("convert", converted, "-o", tmp_path / "again.onnx")
    assert again.exit_code == 2 and "convert the float32 model instead" in again.stderr


def test_explain_says_the_mode_scan_judges_in(cli, tmp_path):
    source = exp_softmax_by_hand(tmp_path)
    _, report = _rules(cli, source)
    judged = report["models"][0]["target"]
    header = cli("explain", source).stdout.splitlines()[0]
    assert judged["mode"] == "pure" and f"under float16 {judged['mode']} (cuda)" in header
    assert "autocast" not in header
