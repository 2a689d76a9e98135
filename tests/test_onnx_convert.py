"""precisionaudit convert: onnxconverter-common's float16 conversion with the plan, guarded."""
import os
import warnings

import pytest

pytest.importorskip("onnxconverter_common")
import numpy as np  # noqa: E402
import onnx  # noqa: E402
import onnxruntime as ort  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from onnx_graphs import (  # noqa: E402
    build,
    const,
    exp_softmax_by_hand,
    masked_attention,
    save,
    tensor,
)
from onnx_models import export  # noqa: E402

from precisionaudit.apply.onnx import convert  # noqa: E402
from precisionaudit.runtime.onnx.load import load_onnx  # noqa: E402
from precisionaudit.core.errors import UsageError  # noqa: E402
from precisionaudit.plan.file import load_plan, parse_plan  # noqa: E402
from precisionaudit.runtime.onnx import float16 as onnx_convert  # noqa: E402
from precisionaudit.runtime.onnx import io as onnx_io  # noqa: E402
from precisionaudit.runtime.onnx.graph import elem_types  # noqa: E402

EXPORTERS = [pytest.param(False, id="legacy"), pytest.param(True, id="dynamo")]


@pytest.fixture(scope="module")
def outdir(tmp_path_factory):
    return str(tmp_path_factory.mktemp("onnx_convert"))


def onnx_plan(*entries, dtype="float16"):
    return parse_plan({"version": 1, "target": {"dtype": dtype, "mode": "pure"},
                       "overrides": list(entries)}, "plan.yaml")


def elem_type(model, name):
    for vi in [*model.graph.input, *model.graph.output]:
        if vi.name == name:
            return vi.type.tensor_type.elem_type
    raise KeyError(name)


def run(path_or_model, feeds):
    source = path_or_model if isinstance(path_or_model, str) else path_or_model.SerializeToString()
    return ort.InferenceSession(source, providers=["CPUExecutionProvider"]).run(None, feeds)


# --------------------------------------------------------------------------- the CLI
@pytest.mark.parametrize("dynamo", EXPORTERS)
def test_convert_writes_a_float16_model_that_loads(cli, outdir, tmp_path, dynamo):
    path = export("check_mask_fill.py", outdir, dynamo)
    assert cli("plan", path, "-o", tmp_path / "plan.yaml").exit_code == 0
    out = tmp_path / "fp16.onnx"
    result = cli("convert", path, "--plan", tmp_path / "plan.yaml", "-o", out)
    assert result.exit_code == 0, result.stderr
    model = onnx.load(str(out))
    assert elem_type(model, model.graph.input[0].name) == TensorProto.INT64  # token ids untouched
    assert elem_type(model, model.graph.output[0].name) == TensorProto.FLOAT16
    types = elem_types(onnx.shape_inference.infer_shapes(model))
    planned = [n for n in model.graph.node if n.op_type in ("Softmax", "Where")]
    assert len(planned) == 4 and {types[n.output[0]] for n in planned} == {TensorProto.FLOAT}
    assert {types[n.output[0]] for n in model.graph.node if n.op_type == "MatMul"} == {TensorProto.FLOAT16}
    assert "4 kept in float32 by the plan" in result.stderr
    ids = np.arange(64, dtype=np.int64).reshape(2, 32)
    assert np.isfinite(run(str(out), {model.graph.input[0].name: ids})[0]).all()
    # the -1e9 fill is read by kept nodes only: it stays -1e9, no clipping to report
    assert "clipped" not in result.stderr
    inits = {i.name: i for i in model.graph.initializer}
    fills = [inits[i] for n in planned if n.op_type == "Where" for i in n.input
             if i in inits and inits[i].data_type != TensorProto.BOOL]
    assert fills and all(numpy_helper.to_array(f) == np.float32(-1e9) for f in fills)


def test_keep_io_types_keeps_float32_inputs_and_outputs(cli, tmp_path):
    path = exp_softmax_by_hand(tmp_path)
    cli("plan", path, "-o", tmp_path / "plan.yaml")
    out = tmp_path / "fp16.onnx"
    assert cli("convert", path, "--plan", tmp_path / "plan.yaml", "--keep-io-types", "-o", out).exit_code == 0
    model = onnx.load(str(out))
    # the output comes from a kept node: onnxconverter-common alone leaves it float16
    assert (elem_type(model, "x"), elem_type(model, "y")) == (TensorProto.FLOAT, TensorProto.FLOAT)


def test_bfloat16_is_refused_with_the_reason(cli, tmp_path):
    result = cli("convert", exp_softmax_by_hand(tmp_path), "--dtype", "bfloat16", "-o", tmp_path / "o.onnx")
    assert result.exit_code == 2 and result.stderr.count("\n") == 1
    assert "float16 only" in result.stderr and "no bfloat16 kernels" in result.stderr
    assert not (tmp_path / "o.onnx").exists()


@pytest.mark.parametrize("name, content, message", [
    ("junk.onnx", b"\x00\xff not protobuf \xfe" * 8, "not a readable ONNX model"),
    ("absent.onnx", None, "no such file"),
    ("model.py", b"x = 1\n", "convert takes an ONNX model"),
])
def test_bad_models_are_one_line_and_exit_2(cli, tmp_path, name, content, message):
    if content is not None:
        (tmp_path / name).write_bytes(content)
    result = cli("convert", tmp_path / name, "-o", tmp_path / "o.onnx")
    assert result.exit_code == 2 and result.stderr.count("\n") == 1 and message in result.stderr
    assert not (tmp_path / "o.onnx").exists()


def test_truncated_model(cli, outdir, tmp_path):
    whole = open(export("check_clean.py", outdir, False), "rb").read()
    (tmp_path / "cut.onnx").write_bytes(whole[: len(whole) // 3])
    result = cli("convert", tmp_path / "cut.onnx", "-o", tmp_path / "o.onnx")
    assert result.exit_code == 2 and "not a readable ONNX model" in result.stderr


def test_missing_external_data(cli, outdir, tmp_path):
    source = export("check_clean.py", outdir, True)  # the dynamo exporter writes <model>.data
    copy = tmp_path / "ext.onnx"
    copy.write_bytes(open(source, "rb").read())  # the model without its weights file
    result = cli("convert", copy, "-o", tmp_path / "o.onnx")
    assert result.exit_code == 2 and "external data missing" in result.stderr


@pytest.mark.parametrize("plan, message", [
    ({"nodes": ["/blocks.7/attn/Where"]}, "names node '/blocks.7/attn/Where', which the model does not have"),
    ({"module": "gate", "ops": ["exp"]}, "a plan for a PyTorch model"),
])
def test_a_plan_for_another_model_is_refused(cli, tmp_path, plan, message):
    path = exp_softmax_by_hand(tmp_path)
    (tmp_path / "plan.yaml").write_text(f"version: 1\noverrides: [{plan}]\n".replace("'", '"'))
    result = cli("convert", path, "--plan", tmp_path / "plan.yaml", "-o", tmp_path / "o.onnx")
    assert result.exit_code == 2 and result.stderr.count("\n") == 1 and message in result.stderr


def test_a_plan_for_another_dtype_is_refused(cli, tmp_path):
    path = exp_softmax_by_hand(tmp_path)
    (tmp_path / "plan.yaml").write_text("version: 1\ntarget: {dtype: bfloat16, mode: pure}\n"
                                        "overrides: [{nodes: [/gate/Exp]}]\n")
    result = cli("convert", path, "--plan", tmp_path / "plan.yaml", "-o", tmp_path / "o.onnx")
    assert result.exit_code == 2 and "made for dtype bfloat16, not float16" in result.stderr


def test_a_model_already_in_float16_is_refused(cli, tmp_path):
    path = exp_softmax_by_hand(tmp_path)
    assert cli("convert", path, "-o", tmp_path / "fp16.onnx").exit_code == 0
    result = cli("convert", tmp_path / "fp16.onnx", "-o", tmp_path / "again.onnx")
    assert result.exit_code == 2 and "already has float16 tensors" in result.stderr


# --------------------------------------------------------------------------- guarding the converter
@pytest.mark.parametrize("name", ["check_clean.py", "check_exp_overflow.py"])
def test_legacy_cast_nodes_break_onnxconverter_common_and_are_fixed(outdir, name):
    from onnxconverter_common.float16 import convert_float_to_float16

    model = load_onnx(export(name, outdir, False))
    assert any(n.op_type == "Cast" for n in model.graph.node)  # the legacy exporter's .float()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # its truncation warnings
        raw = convert_float_to_float16(model)
    with pytest.raises(UsageError, match=r"at node /Cast \(Cast\).*declared output type"):
        onnx_io.verify(raw, "raw conversion")
    conversion = convert(model)
    onnx_io.verify(conversion.model, "guarded conversion")
    assert conversion.retargeted_casts == ["/Cast"]


def test_a_conversion_that_does_not_load_is_not_written(cli, outdir, tmp_path, monkeypatch):
    path = export("check_clean.py", outdir, False)
    out = tmp_path / "fp16.onnx"
    out.write_bytes(b"previous")
    # without the Cast repairs and the dtype reconciliation, onnxconverter-common's output does not load
    monkeypatch.setattr(onnx_convert, "_no_op_casts_to_identity", lambda model: [])
    monkeypatch.setattr(onnx_convert, "_retarget_casts", lambda graph, converted: [])
    monkeypatch.setattr(onnx_convert, "reconcile_dtypes", lambda model, kept, converted: [])
    result = cli("convert", path, "-o", out)
    assert result.exit_code == 2 and result.stderr.count("\n") == 1
    assert "does not load in onnxruntime at node /Cast (Cast)" in result.stderr
    assert out.read_bytes() == b"previous" and os.listdir(tmp_path) == ["fp16.onnx"]


def test_an_interrupted_write_leaves_the_target_untouched(tmp_path, monkeypatch):
    model = load_onnx(exp_softmax_by_hand(tmp_path))
    target = tmp_path / "out.onnx"
    target.write_bytes(b"previous")

    def half_written(model, path):
        open(path, "wb").write(model.SerializeToString()[:10])
        raise OSError("disk full")

    monkeypatch.setattr(onnx_io, "_save", half_written)
    with pytest.raises(OSError):
        onnx_io.write_atomic(model, str(target))
    assert target.read_bytes() == b"previous" and sorted(os.listdir(tmp_path)) == ["gate.onnx", "out.onnx"]


def test_a_kept_exp_read_by_two_kept_nodes_hands_them_float32(tmp_path):
    """onnxconverter-common folds its cast pair only for one reader: alone, the Exp's
    result reaches ReduceSum and Div rounded to float16 (inf)."""
    model = load_onnx(exp_softmax_by_hand(tmp_path))
    plan = onnx_plan({"nodes": ["/gate/Exp", "/gate/ReduceSum", "/gate/Div_1"]})
    converted = convert(model, plan, keep_io_types=True).model
    writers = {o: n for n in converted.graph.node for o in n.output}
    for name in ("/gate/ReduceSum", "/gate/Div_1"):
        node = next(n for n in converted.graph.node if n.name == name)
        assert writers[node.input[0]].name == "/gate/Exp", name  # straight from the Exp, in fp32
    x = np.random.default_rng(0).standard_normal((32, 16)).astype(np.float32)
    expected = run(model, {"x": x})[0]
    np.testing.assert_allclose(run(converted, {"x": x})[0], expected, atol=2e-3)


def test_constants_that_do_not_fit_float16_are_reported_with_their_readers(tmp_path):
    model = load_onnx(masked_attention(tmp_path))
    conversion = convert(model)
    assert [(c.tensor, c.nodes, c.kind, c.value) for c in conversion.clipped] == [
        ("fill", ["/attn/Where"], "overflow", -1e9)]
    assert "clipped to -65504" in conversion.clipped[0].message()
    fill = next(i for i in conversion.model.graph.initializer if i.name == "fill")
    assert numpy_helper.to_array(fill) == np.float16(-65504)  # not onnxconverter-common's -1e4


def test_a_constant_read_by_kept_and_converted_nodes_is_split(tmp_path):
    nodes = [helper.make_node("Mul", ["x", "c"], ["a"], name="keep"),
             helper.make_node("Add", ["a", "c"], ["y"], name="convert_me")]
    path = save(build(nodes, [tensor("x", [4])], [tensor("y", [4])], [const("c", [1e5, 1, 2, 3])]), tmp_path)
    conversion = convert(load_onnx(path), onnx_plan({"nodes": ["keep"]}))
    inits = {i.name: i.data_type for i in conversion.model.graph.initializer}
    assert inits == {"c": TensorProto.FLOAT16, "c_fp32": TensorProto.FLOAT}
    assert [(c.tensor, c.nodes) for c in conversion.clipped] == [("c", ["convert_me"])]
    onnx_io.verify(conversion.model, "split")


def test_a_constant_node_read_by_a_kept_node_keeps_its_value(tmp_path):
    nodes = [helper.make_node("Constant", [], ["big"], name="c",
                              value=numpy_helper.from_array(np.array(-1e9, np.float32))),
             helper.make_node("Add", ["x", "big"], ["s"], name="add"),
             helper.make_node("Softmax", ["s"], ["y"], name="softmax")]
    path = save(build(nodes, [tensor("x", [4])], [tensor("y", [4])]), tmp_path)
    conversion = convert(load_onnx(path), onnx_plan({"nodes": ["add", "softmax"]}))
    assert conversion.clipped == []
    big = next(i for i in conversion.model.graph.initializer if i.name == "big")
    assert big.data_type == TensorProto.FLOAT and numpy_helper.to_array(big) == np.float32(-1e9)


def test_an_op_type_entry_keeps_every_node_of_the_type(tmp_path):
    model = load_onnx(masked_attention(tmp_path))
    conversion = convert(model, onnx_plan({"op_types": ["MatMul"]}))
    assert conversion.by_plan == ["/attn/MatMul", "/attn/MatMul_1"]
    assert 0 < conversion.low_share < 1


def test_a_custom_op_onnxruntime_does_not_know(cli, tmp_path):
    """Scanned and planned around (the scan lists it as unanalysed), but not convertible:
    the result could not be verified; check cannot even run the fp32 reference."""
    nodes = [helper.make_node("Fancy", ["x"], ["h"], domain="com.example", name="fancy"),
             helper.make_node("Exp", ["h"], ["y"], name="/act/Exp")]
    graph = helper.make_graph(nodes, "g", [tensor("x", [4])], [tensor("y", [4])])
    model = helper.make_model(graph, ir_version=10, opset_imports=[
        helper.make_opsetid("", 17), helper.make_opsetid("com.example", 1)])
    path = save(model, tmp_path)
    assert cli("plan", path, "-o", tmp_path / "plan.yaml").exit_code == 0
    result = cli("convert", path, "--plan", tmp_path / "plan.yaml", "-o", tmp_path / "o.onnx")
    assert result.exit_code == 2 and result.stderr.count("\n") == 1
    assert f"{path} does not load in onnxruntime at node fancy (Fancy)" in result.stderr
    result = cli("check", path)
    assert result.exit_code == 2 and result.stderr.count("\n") == 1 and "reference run failed" in result.stderr
    assert not (tmp_path / "o.onnx").exists()


def test_without_the_onnx_extra_the_missing_package_is_named(cli, tmp_path, monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "onnxconverter_common" else real(name, *a))
    result = cli("convert", exp_softmax_by_hand(tmp_path), "-o", tmp_path / "o.onnx")
    assert result.exit_code == 2 and "onnxconverter-common is not installed" in result.stderr


# --------------------------------------------------------------------------- dtypes at the boundaries
def pooler(directory):
    """x → MatMul → h, a graph output that a Gather also reads → Tanh → y: an encoder's
    last_hidden_state and its pooler."""
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"),
             helper.make_node("Gather", ["h", "first"], ["g"], name="gather", axis=1),
             helper.make_node("Tanh", ["g"], ["y"], name="tanh")]
    rng = np.random.default_rng(0)
    model = build(nodes, [tensor("x", [2, 3, 4])], [tensor("h", [2, 3, 4]), tensor("y", [2, 4])],
                  [const("w", rng.standard_normal((4, 4))), const("first", 0, np.int64)])
    return load_onnx(save(model, directory, "pooler.onnx"))


def strict_types(model):
    """Tensor → element type from strict ONNX type inference (which refuses a declared type
    that is not what the node computes), after the full checker."""
    onnx.checker.check_model(model, full_check=True)
    return elem_types(onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True))


@pytest.mark.parametrize("kept, keep_io_types", [
    pytest.param((), True, id="float32-output-read-by-a-float16-gather"),
    pytest.param(("gather",), False, id="float16-output-read-by-a-float32-gather"),
    pytest.param(("mm",), True, id="kept-writer-float16-gather"),
    pytest.param(("gather", "tanh"), True, id="kept-gather-and-reader"),
    pytest.param((), False, id="all-float16"),
])
def test_a_gather_reads_its_data_in_the_dtype_it_runs_in(tmp_path, kept, keep_io_types):
    """onnxconverter-common casts in front of a kept node only what has a value_info or is
    a graph input, and with keep_io_types hands the other readers of a graph output the
    float32 cast under the output's name: the Gather's data and result disagreed (BERT's
    pooler, issue 25) and onnxruntime refused the model."""
    model = pooler(tmp_path)
    conversion = convert(model, onnx_plan({"nodes": list(kept)}) if kept else None,
                         keep_io_types=keep_io_types)
    converted = conversion.model
    types = strict_types(converted)
    gather = next(n for n in converted.graph.node if n.name == "gather")
    runs_in = TensorProto.FLOAT if "gather" in kept else TensorProto.FLOAT16
    assert (types[gather.input[0]], types[gather.output[0]]) == (runs_in, runs_in)
    outputs = TensorProto.FLOAT if keep_io_types else TensorProto.FLOAT16
    assert [elem_type(converted, o) for o in ("h", "y")] == [outputs, outputs]
    x = np.random.default_rng(1).standard_normal((2, 3, 4)).astype(np.float32)
    expected = run(model, {"x": x})
    got = run(converted, {"x": x if keep_io_types else x.astype(np.float16)})
    for e, g in zip(expected, got):
        np.testing.assert_allclose(g.astype(np.float32), e, atol=1e-2 + 1e-2 * np.abs(e).max())


def test_a_gather_reads_the_float16_tensor_not_a_cast_back(tmp_path):
    """The float32 graph output is the converter's cast of a float16 tensor: the float16
    Gather reads that tensor, without a float32 → float16 round trip."""
    conversion = convert(pooler(tmp_path), keep_io_types=True)
    writers = {o: n for n in conversion.model.graph.node for o in n.output}
    gather = next(n for n in conversion.model.graph.node if n.name == "gather")
    assert writers[gather.input[0]].name == "mm" and conversion.boundary_casts == []


def test_a_kept_gather_gets_a_cast_in_front(tmp_path):
    conversion = convert(pooler(tmp_path), onnx_plan({"nodes": ["gather"]}))
    casts = {n.name: n for n in conversion.model.graph.node if n.name in conversion.boundary_casts}
    gather = next(n for n in conversion.model.graph.node if n.name == "gather")
    assert list(casts) == ["h_fp32"] and gather.input[0] == "h_fp32"
    assert list(casts["h_fp32"].input) == ["h"] and casts["h_fp32"].attribute[0].i == TensorProto.FLOAT


@pytest.mark.parametrize("build_model, keep", [
    (exp_softmax_by_hand, ["/gate/Exp", "/gate/ReduceSum", "/gate/Div_1"]),
    (masked_attention, ["/attn/Where", "/attn/Softmax"]),
])
@pytest.mark.parametrize("keep_io_types", [False, True])
def test_a_conversion_the_converter_got_right_is_left_alone(tmp_path, build_model, keep, keep_io_types):
    conversion = convert(load_onnx(build_model(tmp_path)), onnx_plan({"nodes": keep}),
                         keep_io_types=keep_io_types)
    assert conversion.boundary_casts == []
    strict_types(conversion.model)


# --------------------------------------------------------------------------- exported encoders
ENCODER_EXPORTS = [pytest.param(name, dynamo, id=f"{name}-{'dynamo' if dynamo else 'legacy'}")
                   for name in ("bert", "roberta", "distilbert") for dynamo in (False, True)]


@pytest.mark.parametrize("name, dynamo", ENCODER_EXPORTS)
def test_exported_encoders_convert_check_and_pass(cli, outdir, tmp_path, name, dynamo):
    """BERT, RoBERTa, DistilBERT by both exporters: the static plan's conversion and the
    whole-graph one pass the strict checker, load, and stay within the check's tolerance."""
    pytest.importorskip("transformers")
    import json

    from onnx_models import encoder_inputs, export_encoder

    path = export_encoder(name, outdir, dynamo)
    plan = tmp_path / "plan.yaml"
    assert cli("plan", path, "-o", plan).exit_code == 0
    model = load_onnx(path)
    for plan_obj in (None, load_plan(str(plan))):
        for keep_io_types in (False, True):
            conversion = convert(model, plan_obj, keep_io_types=keep_io_types)
            strict_types(conversion.model)
            onnx_io.verify(conversion.model, f"{name} converted")
    ids, mask = (t.numpy() for t in encoder_inputs(1))
    np.savez(tmp_path / "data.npz", input_ids=ids, attention_mask=mask)
    result = cli("check", path, "--plan", plan, "--data", tmp_path / "data.npz", "--format", "json")
    report = json.loads(result.stdout)
    assert [v["status"] for v in report["variants"]] == ["ok", "ok", "ok"], result.stdout
    assert result.exit_code == 0 and report["passed"]


def test_reconcile_casts_in_front_of_a_node_and_behind_a_graph_output():
    """Hand-made disagreements: a kept Relu handed float16; a converted Tanh whose graph
    output is declared float32; a Resize whose scales (float32 only) are float16."""
    from precisionaudit.runtime.onnx.reconcile import reconcile_dtypes

    nodes = [helper.make_node("Relu", ["x"], ["r"], name="kept_relu"),
             helper.make_node("Tanh", ["x"], ["t"], name="half_tanh"),
             helper.make_node("Resize", ["x4", "", "scales"], ["z"], name="resize", mode="nearest")]
    model = build(nodes, [tensor("x", [2, 4], TensorProto.FLOAT16), tensor("x4", [1, 1, 2, 2])],
                  [tensor("r", [2, 4]), tensor("t", [2, 4]), tensor("z", [1, 1, 4, 4])],
                  [const("scales", [1, 1, 2, 2], np.float16)])
    inserted = reconcile_dtypes(model, kept={"kept_relu", "resize"}, converted={"half_tanh"})
    assert sorted(inserted) == ["scales_fp32", "t_fp16_to_output", "x_fp32"]
    types = strict_types(model)
    relu = next(n for n in model.graph.node if n.name == "kept_relu")
    assert types[relu.input[0]] == TensorProto.FLOAT and types["t_fp16"] == TensorProto.FLOAT16
    assert [elem_type(model, o) for o in ("r", "t", "z")] == [TensorProto.FLOAT] * 3
    x = np.linspace(-2, 2, 8, dtype=np.float16).reshape(2, 4)
    r, t, z = run(model, {"x": x, "x4": np.ones((1, 1, 2, 2), np.float32)})
    np.testing.assert_allclose(r, np.maximum(x, 0).astype(np.float32))
    np.testing.assert_allclose(t, np.tanh(x).astype(np.float32), atol=1e-3)
    assert z.shape == (1, 1, 4, 4)
