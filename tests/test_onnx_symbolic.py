"""ONNX graphs with symbolic dims (``batch``, ``sequence``), as exports with dynamic axes have
them: every analysis pass treats an unknown dim as unknown (issue 41: a LayerNormalization's
symbolic sequence crashed the range pass with an internal error on most real exports)."""
import json
import math

import pytest

pytest.importorskip("onnx")
import onnx  # noqa: E402
from onnx_graphs import (  # noqa: E402
    exp_softmax_by_hand,
    layer_norm_block,
    masked_attention,
    rms_norm_by_reciprocal,
    scaled_logits,
    with_symbolic_dims,
)
from onnx_models import export, export_encoder, inputs_file  # noqa: E402

from precisionaudit.analysis.facts import fact  # noqa: E402
from precisionaudit.core.numerics import Target  # noqa: E402
from precisionaudit.ir.graph import numel  # noqa: E402
from precisionaudit.rules.engine import load_rules  # noqa: E402
from precisionaudit.scanner import scan  # noqa: E402

GRAPHS = [exp_softmax_by_hand, masked_attention, scaled_logits, rms_norm_by_reciprocal, layer_norm_block]
INTERNAL = "internal error"


def analysed(path):
    results, findings = scan([path], Target("float16", "pure", "cuda"), load_rules())
    assert results[0].status == "ok", results[0].error
    return results[0].graph, findings


def test_numel_of_a_shape_with_an_unknown_dim_is_unknown():
    assert numel((2, 8, 16)) == 256 and numel(()) == 1
    assert numel((None, 8, 16)) is None and numel(None) is None


@pytest.mark.parametrize("build", GRAPHS, ids=lambda f: f.__name__)
def test_every_pass_and_rule_takes_symbolic_dims(build, tmp_path):
    """The same graph with its batch and sequence symbolic: captured and analysed, and the
    findings that no dim decides are the ones the static graph has."""
    path = build(tmp_path)
    symbolic = with_symbolic_dims(path)
    graph, found = analysed(symbolic)
    assert any(None in (node["out_shape"] or ()) for _, node in graph.nodes(data=True))
    _, static = analysed(path)
    assert {(f.rule, f.node) for f in found if f.rule.startswith("PA10")} == \
        {(f.rule, f.node) for f in static if f.rule.startswith("PA10")}


def test_a_layer_norm_over_known_features_keeps_its_bound_when_the_sequence_is_unknown(tmp_path):
    """|x - mean| / std <= sqrt(N) over the N elements a LayerNormalization normalises: its
    axis (-1) spans the 16 features, known, not the batch or the sequence."""
    graph, _ = analysed(with_symbolic_dims(layer_norm_block(tmp_path)))
    norm = graph.nodes["/norm/LayerNormalization"]
    assert norm["out_shape"][:2] == (None, None)
    low, high = fact(norm, "range.value_range")
    assert math.isclose(high, 4.0, rel_tol=1e-3) and math.isclose(low, -4.0, rel_tol=1e-3)  # sqrt(16)
    mean = graph.nodes["/pool/ReduceMean"]  # an average stays within its input's hull
    assert fact(mean, "range.value_range") is None or all(math.isfinite(v) for v in fact(mean, "range.value_range"))


@pytest.mark.parametrize("build", GRAPHS, ids=lambda f: f.__name__)
def test_scan_plan_check_convert_and_explain_run_on_symbolic_dims(build, tmp_path, cli):
    static = build(tmp_path)
    symbolic = with_symbolic_dims(static)
    shapes = []  # the check runs on the shapes the graph was built for
    for vi in onnx.load(static).graph.input:
        dims = [d.dim_value for d in vi.type.tensor_type.shape.dim]
        shapes += ["--input-shape", f"{vi.name}={'x'.join(map(str, dims))}"]
    plan = tmp_path / "plan.yaml"
    for args in (["scan", symbolic, "--mode", "pure"], ["explain", symbolic], ["plan", symbolic, "-o", plan],
                 ["check", symbolic, "--plan", plan, *shapes],
                 ["convert", symbolic, "--plan", plan, "-o", tmp_path / "fp16.onnx"]):
        result = cli(*args)
        assert result.exit_code in (0, 1) and INTERNAL not in result.output, (args[0], result.output)
    assert onnx.load(str(tmp_path / "fp16.onnx")).graph.input[0].type.tensor_type.shape.dim[0].dim_param == "batch"


@pytest.mark.parametrize("dynamo", [False, True], ids=["legacy", "dynamo"])
@pytest.mark.parametrize("name", ["pa107_mask_hazard.py", "bert"])
def test_real_exports_with_dynamic_axes(name, dynamo, tmp_path, cli):
    """Both exporters with dynamic axes: the mask hazard is found as in the static export, the
    plan passes its check on the export's own example inputs, and the conversion is written."""
    path = (export_encoder if name == "bert" else export)(name, str(tmp_path), dynamo, True)
    batch = onnx.load(path).graph.input[0].type.tensor_type.shape.dim[0]
    assert not batch.HasField("dim_value")  # the batch is symbolic
    report = json.loads(cli("scan", path, "--format", "json", "--exit-zero").stdout)
    assert report["models"][0]["status"] == "ok", report["models"][0]["error"]
    if name.startswith("pa107"):
        assert any(f["rule"] == "PA107" and f["severity"] == "error" for f in report["findings"])
    plan = tmp_path / "plan.yaml"
    assert cli("plan", path, "-o", plan).exit_code == 0
    checked = cli("check", path, "--plan", plan, "--data", inputs_file(path), "--format", "json")
    assert checked.exit_code == 0 and json.loads(checked.stdout)["passed"], checked.output
    converted = cli("convert", path, "--plan", plan, "-o", tmp_path / "fp16.onnx")
    assert converted.exit_code == 0, converted.output
