"""ONNX models exported by both torch exporters load into the same IR and meet the same rules."""
import os

import pytest

pytest.importorskip("onnx")
import numpy as np  # noqa: E402
import onnx  # noqa: E402
from conftest import findings_of  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from onnx_graphs import scaled_logits, untyped_square  # noqa: E402
from onnx_models import export  # noqa: E402

from precisionaudit.capture.onnx.model import capture_onnx  # noqa: E402
from precisionaudit.runtime.onnx.graph import module_of  # noqa: E402
from precisionaudit.core.numerics import Target  # noqa: E402

EXPORTERS = [pytest.param(False, id="legacy"), pytest.param(True, id="dynamo")]


@pytest.fixture(scope="module")
def outdir(tmp_path_factory):
    return str(tmp_path_factory.mktemp("onnx"))


def rules_of(path, **kw):
    return {f.rule for f in findings_of(path, **kw)}


@pytest.mark.parametrize("dynamo", EXPORTERS)
def test_mask_constant_is_found(outdir, dynamo):
    found = [f for f in findings_of(export("pa107_mask_hazard.py", outdir, dynamo)) if f.rule == "PA107"]
    assert any(f.evidence["value"] == -1e9 and f.severity == "error" for f in found)


@pytest.mark.parametrize("dynamo", EXPORTERS)
def test_finfo_mask_is_clean(outdir, dynamo):
    """Exported in fp32, finfo(float32).min is baked in: it does not fit fp16 either."""
    found = [f for f in findings_of(export("pa107_mask_clean.py", outdir, dynamo)) if f.rule == "PA107"]
    assert [f.evidence["status"] for f in found] == ["overflow"]


@pytest.mark.parametrize("dynamo", EXPORTERS)
def test_converted_softmax_is_flagged(outdir, dynamo):
    assert "PA101" in rules_of(export("pa106_logits_hazard.py", outdir, dynamo))


@pytest.mark.parametrize("dynamo", EXPORTERS)
def test_prescaled_logits_are_not_flagged(outdir, dynamo):
    assert "PA106" not in rules_of(export("pa106_prescaled_clean.py", outdir, dynamo))


@pytest.mark.parametrize("dynamo", EXPORTERS)
@pytest.mark.parametrize("model", ["pa106_logits_hazard.py", "pa106_prescaled_hazard.py"])
def test_a_scale_onnxruntime_fuses_into_the_matmul_is_applied_before_the_store(outdir, dynamo, model):
    """MatMul → Div/Mul by a constant scalar runs as FusedMatMul(alpha): fp32-scaled, then stored."""
    assert "PA106" not in rules_of(export(model, outdir, dynamo))


@pytest.mark.parametrize("variant,flagged", [({}, False), ({"second_reader": True}, True),
                                             ({"overridable": True}, True)],
                         ids=["fused", "the product is read twice", "the divisor is a graph input"])
def test_onnxruntime_fuses_a_constant_scale_that_alone_reads_the_product(tmp_path, variant, flagged):
    assert ("PA106" in rules_of(scaled_logits(tmp_path, **variant), mode="pure")) == flagged


@pytest.mark.parametrize("dynamo", EXPORTERS)
def test_logits_scaled_after_a_bias_is_added_are_flagged(outdir, dynamo):
    """MatMul → Add(bias) → Div: no fusion, the unscaled product is stored in fp16."""
    (found,) = [f for f in findings_of(export("pa106_baddbmm_hazard.py", outdir, dynamo)) if f.rule == "PA106"]
    assert (found.evidence["head_dim"], found.evidence["scale_before"]) == (64, 1.0)


@pytest.mark.parametrize("dynamo", EXPORTERS)
def test_weights_give_gemm_shapes(outdir, dynamo):
    found = sorted(f.evidence["size"] for f in findings_of(export("pa201_gemm_hazard.py", outdir, dynamo))
                   if f.rule == "PA201")
    assert found == [100, 100]


@pytest.mark.parametrize("dynamo", EXPORTERS)
def test_vocab_from_the_head_gemm_not_the_embedding_gather(outdir, dynamo):
    """The 50257-row embedding is read by a Gather (no GEMM); the head's MatMul/Gemm is."""
    found = [f for f in findings_of(export("pa202_vocab_hazard.py", outdir, dynamo)) if f.rule == "PA202"]
    assert [f.evidence["size"] for f in found] == [50257]


@pytest.mark.parametrize("dynamo", EXPORTERS)
def test_conv_channels(outdir, dynamo):
    found = {f.evidence["size"]: f.severity for f in
             findings_of(export("pa203_channels_hazard.py", outdir, dynamo)) if f.rule == "PA203"}
    assert found == {3: "info", 100: "warning"}


def test_dynamo_export_keeps_module_paths_and_source_lines(outdir):
    captured = capture_onnx(export("pa106_logits_hazard.py", outdir, True), Target(mode="pure"))
    linears = [a for _, a in captured.graph.nodes(data=True) if a["module"] == "qkv"]
    assert linears and linears[0]["file"].endswith("pa106_logits_hazard.py")


def test_legacy_names_give_module_scope():
    node = helper.make_node("MatMul", ["a", "b"], ["c"], name="/blocks.0/attn/MatMul")
    assert module_of(node) == "blocks.0.attn"


def _write(tmp_path, nodes, inputs, outputs, initializers=(), name="m.onnx", domains=()):
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(initializers))
    opsets = [helper.make_opsetid("", 17)] + [helper.make_opsetid(d, 1) for d in domains]
    model = helper.make_model(graph, opset_imports=opsets)
    path = str(tmp_path / name)
    onnx.save(model, path)
    return path


def _tensor(name, shape, elem=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, elem, shape)


def test_initializer_above_fp16_range_is_reported(tmp_path):
    big = helper.make_tensor("w", TensorProto.FLOAT, [2, 2], [1.0, 2.0, 1e6, 3.0])
    path = _write(tmp_path, [helper.make_node("MatMul", ["x", "w"], ["y"], name="/proj/MatMul")],
                  [_tensor("x", [2, 2])], [_tensor("y", [2, 2])], [big])
    found = [f for f in findings_of(path) if f.rule == "PA107"]
    assert [(f.module, f.evidence["value"]) for f in found] == [("proj", 1e6)]


def test_custom_ops_are_listed_as_unanalysed_and_the_rest_scanned(tmp_path):
    nodes = [helper.make_node("Fancy", ["x"], ["h"], domain="com.example", name="fancy"),
             helper.make_node("Exp", ["h"], ["y"], name="/act/Exp")]
    path = _write(tmp_path, nodes, [_tensor("x", [4])], [_tensor("y", [4])], domains=["com.example"])
    captured = capture_onnx(path, Target(mode="pure"))
    assert captured.skipped == ["unanalysed custom ops: com.example::Fancy"]
    assert "PA105" in rules_of(path)


def test_results_without_a_shape_are_a_note(tmp_path):
    captured = capture_onnx(untyped_square(tmp_path), Target(mode="pure"))
    assert [n for n in captured.notes if "no known shape" in n] == [
        "2 node result(s) have no known shape (gelu, square): onnx shape inference could not "
        "derive them; rules that need a dtype or shape did not judge those nodes"]


@pytest.mark.parametrize("dynamo", EXPORTERS)
def test_exported_models_have_every_shape(outdir, dynamo):
    captured = capture_onnx(export("pa106_logits_hazard.py", outdir, dynamo), Target(mode="pure"))
    assert captured.notes == ["judged as converted to float16"]


def test_not_an_onnx_file(tmp_path, cli):
    path = tmp_path / "junk.onnx"
    path.write_bytes(b"\x00\x01 definitely not protobuf \xff\xfe" * 10)
    result = cli("scan", path)
    assert result.exit_code == 2 and "not a readable ONNX model" in result.stderr


def test_truncated_file(tmp_path, outdir, cli):
    whole = open(export("pa111_output_hazard.py", outdir, False), "rb").read()
    path = tmp_path / "cut.onnx"
    path.write_bytes(whole[: len(whole) // 2])
    result = cli("scan", path)
    assert result.exit_code == 2 and "not a readable ONNX model" in result.stderr


def test_missing_external_data(tmp_path, cli):
    w = numpy_helper.from_array(np.full((64, 64), 0.5, dtype=np.float32), "w")
    nodes = [helper.make_node("MatMul", ["x", "w"], ["y"], name="/proj/MatMul")]
    graph = helper.make_graph(nodes, "g", [_tensor("x", [2, 64])], [_tensor("y", [2, 64])], [w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    path = str(tmp_path / "ext.onnx")
    onnx.save(model, path, save_as_external_data=True, location="ext.weights", size_threshold=0)
    os.remove(tmp_path / "ext.weights")
    result = cli("scan", path)
    assert result.exit_code == 2 and "external data missing" in result.stderr


def test_onnx_layer_norm_statistics_are_fp32_by_spec(tmp_path):
    """LayerNormalization computes mean and variance in stash_type (fp32 by default)."""
    scale = numpy_helper.from_array(np.ones(8, dtype=np.float32), "scale")

    def layer_norm(**attrs):
        node = helper.make_node("LayerNormalization", ["x", "scale"], ["y"], name="/ln/LN", **attrs)
        return _write(tmp_path, [node], [_tensor("x", [2, 8])], [_tensor("y", [2, 8])], [scale],
                      name=f"ln{attrs}.onnx")

    assert "PA102" not in rules_of(layer_norm())
    assert "PA102" in rules_of(layer_norm(stash_type=10))  # statistics asked in fp16


def test_onnx_models_are_reported_as_judged_in_pure_mode(outdir, cli):
    path = export("pa111_output_hazard.py", outdir, False)
    assert "(float16, pure, cuda)" in cli("scan", path).stdout.splitlines()[0]
