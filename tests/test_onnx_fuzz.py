"""Malformed-but-loadable ONNX files (issue 11): each defect found by mutation is a named
test, and a seeded loop of mutants runs every command. One bad file is that file's one-line
error: never a traceback, an "internal error", a hang, a changed input or a staging file."""
import collections
import json
import os

import numpy as np
import onnx
import pytest
from click.testing import CliRunner
from conftest import sample
from onnx import helper
from onnx_graphs import build, const, exp_softmax_by_hand, masked_attention, save, tensor
from fuzzing import OK, TALLY
from onnx_mutants import COMMANDS, MUTANTS, judge, rich_graph, run_mutant, seed_models

from precisionaudit.cli import main


def scan_json(*paths):
    result = CliRunner().invoke(main, ["scan", *map(str, paths), "--format", "json"])
    assert "Traceback" not in result.stderr and "internal error" not in result.stderr, result.stderr
    return result, json.loads(result.stdout)


def with_name_scopes(value):
    model = rich_graph()
    for node in model.graph.node:
        del node.metadata_props[:]
        node.metadata_props.add(key="pkg.torch.onnx.name_scopes", value=value)
    return model


@pytest.mark.parametrize("value", ["1", "'abc'", "{'a': 1}", "[1, 2]", "None", "((", "[" * 200 + "]" * 200])
def test_name_scopes_that_are_not_a_list_of_names_fall_back_on_the_node_name(tmp_path, value):
    path = save(with_name_scopes(value), tmp_path)
    result, report = scan_json(path)
    assert report["models"][0]["status"] == "ok", result.stderr
    assert {f["module"] for f in report["findings"]} <= {"attn", "embed", "ln", "pool", "head", ""}


def test_initializer_dims_that_do_not_match_the_data_are_that_models_error(tmp_path):
    model = rich_graph()
    init = next(i for i in model.graph.initializer if i.name == "wq")
    del init.dims[:]
    init.dims.extend([16])  # 256 values declared as 16
    bad = save(model, tmp_path, "bad.onnx")
    good = exp_softmax_by_hand(tmp_path)
    result, report = scan_json(bad, good)
    assert [m["status"] for m in report["models"]] == ["error", "ok"]
    assert result.exit_code == 2
    assert "initializer 'wq' (dims [16], FLOAT) does not match its data" in result.stderr


def test_negative_initializer_dims_are_refused(tmp_path):
    model = rich_graph()
    init = next(i for i in model.graph.initializer if i.name == "wq")
    del init.dims[:]
    init.dims.extend([-1, 16])  # numpy would reshape this without complaint
    verdict, line = judge(save(model, tmp_path), "scan", str(tmp_path))
    assert verdict == "error" and "initializer 'wq' has negative dims [-1, 16]" in line


def cyclic(tmp_path):
    nodes = [helper.make_node("Add", ["x", "b"], ["a"], name="first"),
             helper.make_node("Exp", ["a"], ["b"], name="second"),
             helper.make_node("Softmax", ["b"], ["y"], axis=-1, name="third")]
    return save(build(nodes, [tensor("x", [4, 8])], [tensor("y", [4, 8])]), tmp_path, "cycle.onnx")


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_cyclic_graph_is_refused_by_every_command(tmp_path, command):
    verdict, line = judge(cyclic(tmp_path), command, str(tmp_path))
    assert verdict == "error", line
    assert "the graph has a cycle (first -> second -> first)" in line


def test_attention_with_an_unknown_input_shape_is_not_a_crash(tmp_path):
    """A custom op before the logits matmul: no inferred shape for PA206 (head_dim) to judge."""
    nodes = [helper.make_node("Foo", ["x"], ["h"], name="custom", domain="custom.domain"),
             helper.make_node("MatMul", ["h", "w"], ["s"], name="mm"),
             helper.make_node("Softmax", ["s"], ["y"], axis=-1, name="sm")]
    model = build(nodes, [tensor("x", [4, 8])], [tensor("y", None)], [const("w", np.ones((8, 8)))])
    model.opset_import.add(domain="custom.domain", version=1)
    result, report = scan_json(save(model, tmp_path))
    assert report["models"][0]["status"] == "ok", result.stderr


def test_a_reduction_over_every_dim_of_a_dynamic_shape_has_no_extent(tmp_path):
    nodes = [helper.make_node("ReduceSum", ["x"], ["y"], name="sum", keepdims=1)]
    model = build(nodes, [tensor("x", ["batch", 8])], [tensor("y", [1, 1])])
    result, report = scan_json(save(model, tmp_path))
    assert report["models"][0]["status"] == "ok", result.stderr


def test_an_empty_trailing_optional_input_does_not_crash_onnxruntime(tmp_path):
    """``LayerNormalization(x, w, "")`` is valid ONNX; onnxruntime's optimizer segfaulted on it
    (mutant 270). In a subprocess: a regression must fail this test, not kill the run."""
    import subprocess
    import sys

    model = rich_graph()
    model.graph.node[1].input[2] = ""
    path = save(model, tmp_path)
    proc = subprocess.run([sys.executable, "-m", "precisionaudit", "check", path, "--format", "json"],
                          capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode in (0, 1), proc.stderr[-2000:]
    assert json.loads(proc.stdout)["variants"]


@pytest.mark.parametrize("axes", [1.5, "x", [0.5], helper.make_tensor("t", onnx.TensorProto.FLOAT, [1], [1.0])],
                         ids=["float", "string", "floats", "tensor"])
def test_reduction_axes_of_the_wrong_attribute_type_are_not_a_crash(tmp_path, axes):
    """``onnx_model._axes`` read ``attr.ints`` of whatever 'axes' was: a typed-wrong
    attribute (an old exporter, a mutant) is no axes at all, not an internal error."""
    model = rich_graph()
    node = next(n for n in model.graph.node if n.op_type == "ReduceSum")
    node.attribute.append(helper.make_attribute("axes", axes))
    result, report = scan_json(save(model, tmp_path))
    assert report["models"][0]["status"] in ("ok", "error"), result.stderr


@pytest.mark.parametrize("name,field", [(b"/attn/Softmax", "node #5 name"), (b"LayerNormalization", "node #1 op_type"),
                                        (b"scores", "node #4 input/output name")])
@pytest.mark.parametrize("command", ["scan", "check"])
def test_a_name_that_is_not_utf8_is_one_line(tmp_path, name, field, command):
    """protobuf hands such a string over as bytes; str code on it was an internal error
    (mutants 326, 500, 548)."""
    data = rich_graph().SerializeToString().replace(name, name[:-2] + b"\xff" + name[-1:])
    path = tmp_path / "m.onnx"
    path.write_bytes(data)
    verdict, line = judge(str(path), command, str(tmp_path))
    assert verdict == "error" and f"the {field} is not UTF-8 text" in line, line


def test_onnxruntimes_fallback_banner_does_not_corrupt_the_json_report(tmp_path, monkeypatch):
    """onnxruntime prints "EP Error ... Falling back" with print() when a session fails to
    load in a way it retries (mutant 326 did): check --format json's stdout must stay JSON."""
    import onnxruntime

    real = onnxruntime.InferenceSession

    def banner_first(*args, **kwargs):
        print("*************** EP Error ***************")
        return real(*args, **kwargs)

    monkeypatch.setattr(onnxruntime, "InferenceSession", banner_first)
    result = CliRunner().invoke(main, ["check", exp_softmax_by_hand(tmp_path), "--format", "json"])
    assert result.exit_code in (0, 1), result.stderr
    assert json.loads(result.stdout)["variants"] and "EP Error" in result.stderr


def test_a_negative_input_dim_is_a_dynamic_dim(tmp_path):
    """Some exporters write -1 for a dynamic dim: check asks for its size (mutant 341)."""
    model = onnx.load(exp_softmax_by_hand(tmp_path))
    model.graph.input[0].type.tensor_type.shape.dim[0].dim_value = -1
    verdict, line = judge(save(model, tmp_path, "neg.onnx"), "check", str(tmp_path))
    assert verdict == "error" and "has a dynamic dim 0: give its shape with --input-shape x=Nx16" in line
    assert judge(str(tmp_path / "neg.onnx"), "scan", str(tmp_path))[0] == "ok"


def test_one_malformed_onnx_file_does_not_hide_the_others(tmp_path):
    folder = tmp_path / "models"
    folder.mkdir()
    save(with_name_scopes("[1, 2]"), folder, "a_scopes.onnx")
    cycle = cyclic(tmp_path)
    os.replace(cycle, folder / "b_cycle.onnx")
    masked_attention(folder, "c_good.onnx")
    result, report = scan_json(folder, sample("pa101_softmax_hazard.py"))
    assert [m["status"] for m in report["models"]] == ["ok", "error", "ok", "ok"]
    assert result.exit_code == 2


def test_seeded_mutants_over_every_command(tmp_path):
    """MUTANTS seeded mutants: each is scanned, and goes through one more command in turn
    (explain, plan, convert, check), so every command sees MUTANTS / 4 of them."""
    seeds = seed_models(tmp_path)
    others = [c for c in sorted(COMMANDS) if c != "scan"]
    verdicts, defects = collections.Counter(), []
    for number in range(MUTANTS):
        for command, verdict, detail, what, _ in run_mutant(number, seeds, ("scan", others[number % len(others)]),
                                                            tmp_path):
            verdicts[command, verdict] += 1
            TALLY.add("onnx", verdict, f"mutant {number} ({what}) {command}", detail)
            if verdict not in OK:
                defects.append(f"mutant {number} ({what}) {command}: {verdict}: {detail}")
    assert not defects, "\n".join(defects)
    assert verdicts["scan", "ok"] > MUTANTS // 4  # the mutants are not all unreadable
