"""ONNX plans: node / op-type entries in the plan file, and findings → nodes kept in fp32."""
import pytest

pytest.importorskip("onnxruntime")
pytest.importorskip("onnxconverter_common")
import yaml  # noqa: E402
from conftest import findings_of  # noqa: E402
from onnx_graphs import (exp_named_like_a_softmax, exp_softmax_by_hand, masked_attention,  # noqa: E402
                         rms_norm_by_reciprocal)
from onnx_models import export  # noqa: E402

from precisionaudit.capture.onnx.model import capture_onnx  # noqa: E402
from precisionaudit.runtime.onnx.load import load_onnx  # noqa: E402
from precisionaudit.core.findings import Finding  # noqa: E402
from precisionaudit.core.target import Target  # noqa: E402
from precisionaudit.plan.file import PlanError, dump_plan, load_plan, parse_plan  # noqa: E402
from precisionaudit.plan.onnx import make_onnx_plan  # noqa: E402

EXPORTERS = [pytest.param(False, id="legacy"), pytest.param(True, id="dynamo")]
TARGET = {"dtype": "float16", "mode": "pure", "device": "cuda"}


@pytest.fixture(scope="module")
def outdir(tmp_path_factory):
    return str(tmp_path_factory.mktemp("onnx_plan"))


def plan_of(cli, path, *args):
    result = cli("plan", path, *args)
    assert result.exit_code == 0, result.stderr
    return yaml.safe_load(result.stdout)


def kept(plan) -> list:
    return [n for entry in plan["overrides"] for n in entry.get("nodes", [])]


# --------------------------------------------------------------------------- plan file
def test_node_and_op_type_entries_round_trip():
    data = {"version": 1, "target": TARGET, "overrides": [
        {"nodes": ["/attn/Where", "/attn/Add"], "rules": ["PA107"], "reason": "mask"},
        {"op_types": ["Softmax"], "rules": ["PA101"]}]}
    plan = parse_plan(data, "p.yaml")
    assert plan.is_onnx and [o.module for o in plan.overrides] == [None, None]
    again = yaml.safe_load(dump_plan(plan))
    assert again["overrides"] == [
        {"nodes": ["/attn/Where", "/attn/Add"], "dtype": "float32", "rules": ["PA107"], "reason": "mask"},
        {"op_types": ["Softmax"], "dtype": "float32", "rules": ["PA101"]}]


@pytest.mark.parametrize("entry, message", [
    ({"op_types": ["Cast"]}, "op_types cannot keep Cast in float32"),
    ({"nodes": []}, "nodes must be a non-empty list of ONNX node names"),
    ({"nodes": "/attn/Where"}, "nodes must be a non-empty list"),
    ({"nodes": ["a"], "module": "attn"}, "not both (module given too)"),
    ({"op_types": ["Softmax"], "ops": ["softmax"]}, "not both (ops given too)"),
    ({"nodes": ["a"], "dtype": "float16"}, "dtype 'float16' is not supported"),
])
def test_invalid_onnx_entries_name_the_entry(entry, message):
    with pytest.raises(PlanError) as err:
        parse_plan({"version": 1, "target": TARGET, "overrides": [entry]}, "p.yaml")
    assert str(err.value).startswith("p.yaml: overrides[0]") and message in str(err.value)


def test_a_plan_does_not_mix_modules_and_nodes():
    with pytest.raises(PlanError, match="mix module entries"):
        parse_plan({"version": 1, "overrides": [{"module": "attn"}, {"nodes": ["/attn/Where"]}]}, "p.yaml")


def test_apply_plan_refuses_an_onnx_plan():
    torch = pytest.importorskip("torch")
    from precisionaudit import apply_plan

    plan = parse_plan({"version": 1, "overrides": [{"op_types": ["Softmax"]}]}, "p.yaml")
    with pytest.raises(PlanError, match="names ONNX nodes"):
        apply_plan(torch.nn.Linear(2, 2), plan)


# --------------------------------------------------------------------------- planner
def test_an_overflowing_exp_keeps_its_chain_until_the_normalising_div(cli, tmp_path):
    plan = plan_of(cli, exp_softmax_by_hand(tmp_path))
    assert plan["target"] == TARGET
    assert kept(plan) == ["/gate/Exp", "/gate/ReduceSum", "/gate/Div_1"]  # not the MatMul, not the scale


def test_an_rms_norms_reciprocal_chain_stops_at_the_mul_that_normalises(cli, tmp_path):
    """x * Reciprocal(Sqrt(mean(x^2) + eps)) is back in range like x / sqrt(...): the gain and
    the projection after it stay float16 (T5's dynamo export kept 66 nodes, its GEMMs too)."""
    plan = plan_of(cli, rms_norm_by_reciprocal(tmp_path))
    assert sorted(kept(plan)) == sorted(["/norm/Pow", "/norm/ReduceMean", "/norm/Add", "/norm/Sqrt",
                                         "/norm/Reciprocal", "/norm/Mul"])
    assert not any(entry.get("op_types") for entry in plan["overrides"])


def test_a_node_named_like_an_unnamed_one_stays_a_separate_node_the_plan_keeps(tmp_path):
    """Scan, plan and convert name nodes with one function: the unnamed Softmax after an Exp
    named ``softmax_0`` is ``softmax_0_`` everywhere, and a PA101 plan keeps it, not the Exp."""
    path = exp_named_like_a_softmax(tmp_path)
    graph = capture_onnx(path, Target("float16", "pure")).graph
    assert {name: graph.nodes[name]["op"] for name in graph} == {"softmax_0": "exp", "softmax_0_": "softmax"}
    found = findings_of(path, mode="pure", select=("PA101",))
    assert [(f.rule, f.node, f.op) for f in found] == [("PA101", "softmax_0_", "softmax")]
    plan, _ = make_onnx_plan(found, load_onnx(path), Target("float16", "pure"))
    assert [n for o in plan.overrides for n in o.nodes or []] == ["softmax_0_"]


def test_a_mask_fill_keeps_the_add_after_it_and_stops_at_the_softmax(cli, tmp_path):
    plan = plan_of(cli, masked_attention(tmp_path))
    by_rule = {tuple(e["rules"]): e.get("nodes") for e in plan["overrides"]}
    assert by_rule == {("PA107",): ["/attn/Where", "/attn/Add"], ("PA101",): ["/attn/Softmax"]}


def test_min_severity_error_leaves_warnings_out(cli, outdir):
    path = export("pa106_baddbmm_hazard.py", outdir, True)

    def rules(*args):
        return {r for e in plan_of(cli, path, *args)["overrides"] for r in e["rules"]}

    assert "PA106" in rules()  # q @ k^T + bias, scaled after: a warning
    assert rules("--min-severity", "error") == {"PA101"}


@pytest.mark.parametrize("dynamo", EXPORTERS)
def test_an_op_type_kept_everywhere_becomes_one_op_types_entry(cli, outdir, dynamo):
    plan = plan_of(cli, export("check_mask_fill.py", outdir, dynamo))
    # LayerNormalization is not kept: its statistics are fp32 by the spec (stash_type)
    assert {tuple(e["op_types"]): e["rules"] for e in plan["overrides"]} == {
        ("Where",): ["PA107"], ("Softmax",): ["PA101"]}


def test_op_types_only_when_every_node_of_the_type_is_kept(tmp_path):
    model = load_onnx(masked_attention(tmp_path))
    one = Finding("PA106", "attention-logits-overflow", "warning", "m.onnx", None, "m", "/attn/MatMul",
                  "matmul", "attn", "logits", fix={"action": "keep_fp32", "ops": ["matmul"]})
    plan, _ = make_onnx_plan([one], model, Target("float16", "pure"))
    entry = plan.overrides[0]
    assert entry.op_types is None and entry.nodes[0] == "/attn/MatMul"  # MatMul_1 stays float16
    # the logits grow: Where and Add follow until the Softmax, the second MatMul does not
    assert entry.nodes == ["/attn/MatMul", "/attn/Where", "/attn/Add", "/attn/Softmax"]


def test_the_plan_file_is_deterministic_and_loads(cli, outdir, tmp_path):
    path = export("check_exp_overflow.py", outdir, False)
    texts = []
    for _ in range(2):
        assert cli("plan", path, "-o", tmp_path / "p.yaml").exit_code == 0
        texts.append((tmp_path / "p.yaml").read_text())
    assert texts[0] == texts[1] and f"precisionaudit convert {path} --plan {tmp_path / 'p.yaml'}" in texts[0]
    assert load_plan(str(tmp_path / "p.yaml")).is_onnx


# --------------------------------------------------------------------------- plan --prune
def test_prune_keeps_the_hazard_the_float16_run_needs(cli, tmp_path):
    result = cli("plan", exp_softmax_by_hand(tmp_path), "--prune")
    assert result.exit_code == 0
    assert kept(yaml.safe_load(result.stdout)) == ["/gate/Exp", "/gate/ReduceSum", "/gate/Div_1"]
    assert "(seed 0, 3 onnxruntime runs): keeps 1 of 1 flagged hazards" in result.stdout
    assert "float16 run passed" in result.stdout


@pytest.mark.parametrize("dynamo", EXPORTERS)
def test_prune_drops_hazards_the_inputs_do_not_trigger(cli, outdir, dynamo):
    """The -1e9 masks are clipped to -65504 in front of a softmax: harmless; the softmaxes
    are within tolerance in float16. Two runs: reference and baseline."""
    result = cli("plan", export("check_mask_fill.py", outdir, dynamo), "--prune")
    assert result.exit_code == 0 and yaml.safe_load(result.stdout)["overrides"] == []
    assert "2 onnxruntime runs): keeps 0 of 4 flagged hazards" in result.stdout
    assert "dropped (within tolerance without them on these inputs):" in result.stdout


def test_prune_says_when_no_plan_passes(cli, tmp_path):
    from onnx import helper
    from onnx_graphs import build, const, save, tensor

    nodes = [helper.make_node("Mul", ["x", "k"], ["a"], name="scale"),
             helper.make_node("Mul", ["a", "k"], ["y"], name="scale_again")]  # 1e6: inf in fp16, unflagged
    path = save(build(nodes, [tensor("x", [8])], [tensor("y", [8])], [const("k", 1000.0)]), tmp_path)
    result = cli("plan", path, "--prune")
    assert result.exit_code == 0 and "even the whole plan's float16 run is out of tolerance" in result.stderr
    assert "did NOT pass" in result.stdout and "error starts at nodes no finding covers: scale_again" in result.stdout


def test_input_shape_needs_an_onnx_model_and_prune_float16(cli, tmp_path):
    from conftest import sample

    result = cli("plan", sample("check_clean.py"), "--prune", "--input-shape", "x=2x3")
    assert result.exit_code == 2 and "--input-shape is for ONNX models" in result.stderr
    result = cli("plan", exp_softmax_by_hand(tmp_path), "--prune", "--dtype", "bfloat16")
    assert result.exit_code == 2 and "no bfloat16 kernels" in result.stderr


def test_error_starts_are_where_divergence_begins():
    from onnx import helper
    from onnx_graphs import build, tensor

    from precisionaudit.prune.onnx import error_starts

    nodes = [helper.make_node("Exp", ["x"], ["e"], name="exp"), helper.make_node("Neg", ["e"], ["n"], name="neg"),
             helper.make_node("Relu", ["x"], ["r"], name="relu"), helper.make_node("Add", ["n", "r"], ["y"], name="add")]
    model = build(nodes, [tensor("x", [2])], [tensor("y", [2])])
    watched = [("exp", 0, "e"), ("neg", 0, "n"), ("relu", 0, "r"), ("add", 0, "y")]
    kinds = {("exp", 0): "nonfinite", ("neg", 0): "nonfinite", ("relu", 0): None, ("add", 0): "nonfinite"}
    assert error_starts(model, watched, kinds) == {"exp"}
    kinds[("relu", 0)] = "exceeds_tolerance"
    assert error_starts(model, watched, kinds) == {"exp", "relu"}
