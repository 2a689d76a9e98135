"""precisionaudit check on ONNX models: fp32 vs converted vs converted + plan in onnxruntime."""
import json

import pytest

pytest.importorskip("onnxruntime")
import numpy as np  # noqa: E402
import onnx  # noqa: E402
import onnxruntime as ort  # noqa: E402
from conftest import sample  # noqa: E402
from onnx import TensorProto, helper  # noqa: E402
from onnx_graphs import build, const, exp_softmax_by_hand, save, tensor, untyped_square  # noqa: E402
from onnx_models import export  # noqa: E402

from precisionaudit.runtime.onnx.load import load_onnx  # noqa: E402
from precisionaudit.runtime.onnx.emulate import emulate  # noqa: E402
from precisionaudit.runtime.onnx.inputs import make_inputs, resolve_shapes  # noqa: E402

EXPORTERS = [pytest.param(False, id="legacy"), pytest.param(True, id="dynamo")]


@pytest.fixture(scope="module")
def outdir(tmp_path_factory):
    return str(tmp_path_factory.mktemp("onnx_check"))


def check_json(cli, *args):
    result = cli("check", *args, "--format", "json")
    return result, json.loads(result.stdout) if result.stdout else None


def by_name(report):
    return {v["name"]: v for v in report["variants"]}


# --------------------------------------------------------------------------- end to end
@pytest.mark.parametrize("dynamo", EXPORTERS)
def test_scan_plan_convert_check_a_model_whose_conversion_overflows(cli, outdir, tmp_path, dynamo):
    path = export("check_exp_overflow.py", outdir, dynamo)
    assert cli("scan", path).exit_code == 1  # PA105: exp in float16
    assert cli("plan", path, "-o", tmp_path / "plan.yaml").exit_code == 0
    assert cli("convert", path, "--plan", tmp_path / "plan.yaml", "-o", tmp_path / "fp16.onnx").exit_code == 0

    result, report = check_json(cli, path, "--plan", tmp_path / "plan.yaml")
    assert result.exit_code == 0 and report["passed"] is True
    variants = by_name(report)
    assert variants["baseline"]["status"] == "nonfinite"
    divergence = variants["baseline"]["first_divergence"]
    assert (divergence["op"], divergence["kind"], divergence["module"]) == ("exp", "nonfinite", "gate")
    assert variants["planned"]["status"] == "ok" and variants["planned"]["first_divergence"] is None
    assert variants["planned"]["plan"]["nodes"] == 3
    assert variants["planned"]["gemm_flops_low_precision"] == 1.0  # only Exp, ReduceSum, Div kept
    assert report["device"] == "onnxruntime-cpu" and report["executions"] == {"forward": 3, "backward": 0}

    without_plan, _ = check_json(cli, path)
    assert without_plan.exit_code == 1  # the baseline's verdict


@pytest.mark.parametrize("dynamo", EXPORTERS)
def test_scan_plan_convert_check_a_clean_model(cli, outdir, tmp_path, dynamo):
    path = export("check_clean.py", outdir, dynamo)
    assert cli("scan", path).exit_code == 0
    assert cli("plan", path, "-o", tmp_path / "plan.yaml").exit_code == 0
    assert cli("convert", path, "--plan", tmp_path / "plan.yaml", "-o", tmp_path / "fp16.onnx").exit_code == 0
    result, report = check_json(cli, path, "--plan", tmp_path / "plan.yaml")
    assert result.exit_code == 0
    assert [(v["name"], v["status"]) for v in report["variants"]] == [
        ("reference", "ok"), ("baseline", "ok"), ("planned", "ok")]
    out = by_name(report)["baseline"]["outputs"][0]
    assert 0 < out["max_abs"] <= out["bound"] and out["cosine"] > 0.999  # float16 rounding, within bounds


def test_the_report_has_the_pytorch_checks_shape(cli, outdir):
    _, onnx_report = check_json(cli, export("check_clean.py", outdir, True))
    _, torch_report = check_json(cli, sample("check_clean.py"), "--mode", "pure")
    assert set(torch_report) <= set(onnx_report)
    for name in ("baseline",):
        assert set(by_name(torch_report)[name]) <= set(by_name(onnx_report)[name])
        assert set(by_name(torch_report)[name]["outputs"][0]) <= set(by_name(onnx_report)[name]["outputs"][0])
    assert onnx_report["target"] == {"dtype": "float16", "mode": "pure", "device": "cuda"}


def test_text_report_names_the_first_diverging_node(cli, tmp_path):
    result = cli("check", exp_softmax_by_hand(tmp_path))
    assert result.exit_code == 1
    assert "first divergence: gate · exp [/gate/Exp]" in result.stdout
    assert "FAILED: the baseline variant went non-finite (inf/NaN)" in result.stdout


# --------------------------------------------------------------------------- float16 numerics
def _exp_then_scale(tmp_path):
    nodes = [helper.make_node("Exp", ["x"], ["e"], name="exp"),
             helper.make_node("Mul", ["e", "s"], ["y"], name="mul")]
    model = build(nodes, [tensor("x", [3], TensorProto.FLOAT16)], [tensor("y", [3], TensorProto.FLOAT16)],
                  [const("s", 0.001, np.float16)])
    return model


def test_the_emulation_rounds_every_node_to_float16(tmp_path):
    model = _exp_then_scale(tmp_path)
    x = np.array([12.0, 1.0, 11.0], dtype=np.float16)
    with np.errstate(over="ignore"):
        e = np.exp(x.astype(np.float32)).astype(np.float16)  # each node's result in float16
    per_op = (e.astype(np.float32) * np.float16(0.001).astype(np.float32)).astype(np.float16)
    assert np.isinf(per_op[0])  # exp(12) = 162755 > 65504
    emulated, _ = emulate(model)
    got = ort.InferenceSession(emulated.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, {"x": x.astype(np.float32)})[0]
    np.testing.assert_array_equal(got, per_op.astype(np.float32))
    # onnxruntime's CPU provider, run as is, keeps Exp -> Mul in float32 and hides the overflow
    as_is = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    assert np.isfinite(as_is[0]), "onnxruntime now rounds inside fp32 regions: revisit onnx_emulate's note"


def test_results_shape_inference_leaves_untyped_are_rounded_too():
    model = untyped_square()
    assert not onnx.shape_inference.infer_shapes(model).graph.value_info  # g, sq: no type
    emulated, _ = emulate(model)
    got = ort.InferenceSession(emulated.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, {"x": np.array([300.0], dtype=np.float32)})[0]
    assert np.isinf(got[0])  # 300² = 90000 overflows float16 before the Div; unrounded: 90


def test_what_the_check_cannot_measure_is_a_note(cli, tmp_path):
    """x → com.microsoft Gelu (onnx infers no type for it) → MatMul → y: the Gelu result is
    not compared and the MatMul's FLOPs are not counted; both are said."""
    nodes = [helper.make_node("Gelu", ["x"], ["g"], name="gelu", domain="com.microsoft"),
             helper.make_node("MatMul", ["g", "w"], ["y"], name="proj")]
    graph = helper.make_graph(nodes, "g", [tensor("x", [2, 4])], [tensor("y", [2, 4])],
                              [const("w", np.eye(4))])
    model = helper.make_model(graph, ir_version=10, opset_imports=[
        helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)])
    result, report = check_json(cli, save(model, tmp_path))
    notes = report["notes"][1:]
    assert notes == ["node results not compared with the reference: 1 without a known type or shape "
                     "(gelu): a divergence that starts there shows at the next compared node",
                     "GEMM FLOPs of 1 Conv/Gemm/MatMul node(s) not counted, their shapes unknown (proj): "
                     "the low-precision FLOP shares leave them out"]


# --------------------------------------------------------------------------- inputs
@pytest.mark.parametrize("dynamo", EXPORTERS)
def test_token_ids_stay_below_the_vocabulary(outdir, dynamo):
    model = load_onnx(export("check_mask_fill.py", outdir, dynamo))  # nn.Embedding(512, ...)
    feeds, described = make_inputs(model, resolve_shapes(model, {}, "m"), 0, "m")
    ids = next(iter(feeds.values()))
    assert ids.dtype == np.int64 and 0 <= ids.min() and 256 < ids.max() < 512
    assert "[0, 512)" in next(iter(described.values()))["values"]


def test_inputs_are_deterministic_per_seed(tmp_path):
    model = load_onnx(exp_softmax_by_hand(tmp_path))
    shapes = resolve_shapes(model, {}, "m")
    a, b, c = (make_inputs(model, shapes, seed, "m")[0]["x"] for seed in (0, 0, 1))
    assert np.array_equal(a, b) and not np.array_equal(a, c)


def _dynamic(tmp_path):
    nodes = [helper.make_node("MatMul", ["x", "w"], ["y"], name="/proj/MatMul")]
    model = build(nodes, [tensor("x", ["batch", 16])], [tensor("y", ["batch", 4])],
                  [const("w", np.ones((16, 4)) * 0.1)])
    return save(model, tmp_path, "dynamic.onnx")


def test_dynamic_dims_need_an_input_shape(cli, tmp_path):
    path = _dynamic(tmp_path)
    result = cli("check", path)
    assert result.exit_code == 2 and result.stderr.count("\n") == 1
    assert "input 'x' has a dynamic dim 0 ('batch'): give its shape with --input-shape x=Nx16" in result.stderr
    result, report = check_json(cli, path, "--input-shape", "x=3x16")
    assert result.exit_code == 0 and report["inputs"]["x"]["shape"] == [3, 16]


@pytest.mark.parametrize("shape, message", [
    ("y=3x16", "has no input of that name (its inputs: x)"),
    ("x=3", "1 dims given, the input has 2"),
    ("x=3x8", "dim 1 is fixed at 16"),
    ("x=3by16", "expected NAME=DIMS"),
])
def test_bad_input_shapes(cli, tmp_path, shape, message):
    result = cli("check", _dynamic(tmp_path), "--input-shape", shape)
    assert result.exit_code == 2 and result.stderr.count("\n") == 1 and message in result.stderr


# --------------------------------------------------------------------------- bad input
def test_truncated_and_missing_external_data(cli, outdir, tmp_path):
    source = export("check_clean.py", outdir, True)
    whole = open(source, "rb").read()
    (tmp_path / "cut.onnx").write_bytes(whole[: len(whole) // 2])
    (tmp_path / "ext.onnx").write_bytes(whole)  # its .data file is not beside it
    for name, message in (("cut.onnx", "not a readable ONNX model"), ("ext.onnx", "external data missing")):
        result = cli("check", tmp_path / name)
        assert result.exit_code == 2 and result.stderr.count("\n") == 1 and message in result.stderr, name


def test_a_plan_for_another_model_or_dtype(cli, tmp_path):
    path = exp_softmax_by_hand(tmp_path)
    (tmp_path / "other.yaml").write_text("version: 1\noverrides: [{nodes: [/blocks.0/attn/Where]}]\n")
    (tmp_path / "bf16.yaml").write_text("version: 1\ntarget: {dtype: bfloat16}\noverrides: [{nodes: [/gate/Exp]}]\n")
    for plan, message in (("other.yaml", "which the model does not have"),
                          ("bf16.yaml", "made for dtype bfloat16, not float16")):
        result = cli("check", path, "--plan", tmp_path / plan)
        assert result.exit_code == 2 and result.stderr.count("\n") == 1 and message in result.stderr, plan


@pytest.mark.parametrize("flags, message", [
    (["--dtype", "bfloat16"], "no bfloat16 kernels"),
    (["--grad"], "--grad needs a PyTorch model file"),
])
def test_unsupported_options(cli, tmp_path, flags, message):
    result = cli("check", exp_softmax_by_hand(tmp_path), *flags)
    assert result.exit_code == 2 and result.stderr.count("\n") == 1 and message in result.stderr


def test_a_broken_reference_is_a_usage_error(cli, tmp_path):
    path = exp_softmax_by_hand(tmp_path, scale=0.001)  # exp overflows float32 itself
    result = cli("check", path)
    assert result.exit_code == 2 and "the fp32 reference itself is broken" in result.stderr
    assert onnx.load(path).graph.node  # (the model file is left as it was)
