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


def test_an_rms_norms_chain_stops_where_it_is_back_in_range(cli, tmp_path):
    """x^2 overflows and its mean needs fp32; sqrt(mean + eps) is back in range (at least
    sqrt(eps) = 1e-3, so its reciprocal is at most 1000): the reciprocal, the gain and the
    projection stay float16 (T5's dynamo export kept 66 nodes, its GEMMs too). The axes input
    of ReduceMean (opset 18) is no operand: read as one, its -1 made the mean's range reach
    below 0 and the reciprocal looked unbounded."""
    plan = plan_of(cli, rms_norm_by_reciprocal(tmp_path))
    assert sorted(kept(plan)) == sorted(["/norm/Pow", "/norm/ReduceMean", "/norm/Add", "/norm/Sqrt"])
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


def test_prune_grows_an_unflagged_overflow_from_its_first_divergence(cli, tmp_path):
    """x * 1000 * 1000 is 1e6: inf in float16, and no rule flags a Mul by a constant. The
    search keeps the node where the run first goes non-finite; its fp32 result is the
    graph's (float32) output, so the next run passes."""
    from onnx import helper
    from onnx_graphs import build, const, save, tensor

    nodes = [helper.make_node("Mul", ["x", "k"], ["a"], name="scale"),
             helper.make_node("Mul", ["a", "k"], ["y"], name="scale_again")]
    path = save(build(nodes, [tensor("x", [8])], [tensor("y", [8])], [const("k", 1000.0)]), tmp_path)
    result = cli("plan", path, "--prune")
    assert result.exit_code == 0 and result.stderr == ""
    assert kept(yaml.safe_load(result.stdout)) == ["scale_again"]
    assert "(seed 0, 3 onnxruntime runs): keeps 0 of 0 flagged hazards, and 1 node grown" in result.stdout
    assert "scale_again (nonfinite)" in result.stdout and "float16 run passed" in result.stdout
    assert cli("check", path, "--plan", _written(cli, path, tmp_path)).exit_code == 0


def _written(cli, path, tmp_path) -> str:
    plan = tmp_path / "grown.yaml"
    assert cli("plan", path, "--prune", "-o", plan).exit_code == 0
    return str(plan)


def cancellation(tmp_path) -> str:
    """y = ((3 tanh(x) + 1000) * 1) - 1000: float16 rounds 1000 + v to steps of 0.5, so y is
    off by up to 0.25 (8% of its range) at the Sub, although the Sub only subtracts. Its
    cause is upstream: the Add's result, and the Mul that passes it on (a float16 node
    between would round it again); the Tanh and the first Mul are harmless in float16."""
    from onnx import helper
    from onnx_graphs import build, const, save, tensor

    nodes = [helper.make_node("Tanh", ["x"], ["t"], name="tanh"),
             helper.make_node("Mul", ["t", "three"], ["v"], name="spread"),
             helper.make_node("Add", ["v", "big"], ["a"], name="shift"),
             helper.make_node("Mul", ["a", "one"], ["m"], name="pass_on"),
             helper.make_node("Sub", ["m", "big"], ["y"], name="unshift")]
    inits = [const("three", 3.0), const("big", 1000.0), const("one", 1.0)]
    return save(build(nodes, [tensor("x", [64])], [tensor("y", [64])], inits), tmp_path)


def test_a_divergence_caused_upstream_grows_the_smallest_window_before_it(cli, tmp_path):
    """The Sub first, then (still diverging in float32: its inputs carry the error) the
    window of the nodes it depends on, narrowed from both ends: the Add and the Mul after it."""
    path = cancellation(tmp_path)
    assert cli("check", path).exit_code == 1
    result = cli("plan", path, "--prune")
    assert result.exit_code == 0, result.stderr
    assert kept(yaml.safe_load(result.stdout)) == ["shift", "pass_on", "unshift"]
    assert "2 nodes upstream of unshift, shift .. pass_on" in result.stdout
    assert cli("check", path, "--plan", _written(cli, path, tmp_path)).exit_code == 0


def test_prune_on_data_grows_each_batch_and_keeps_the_union(cli, tmp_path):
    """With --data the search runs per calibration batch (issue 36's held-out ran
    ``plan --prune --data``): the grown window of each batch is in the plan written."""
    import numpy as np

    path = cancellation(tmp_path)
    npz = tmp_path / "batches.npz"
    rng = np.random.default_rng(3)
    np.savez(npz, **{f"{b}.x": rng.standard_normal(64).astype(np.float32) for b in range(2)})
    result = cli("plan", path, "--prune", "--data", npz)
    assert result.exit_code == 0, result.stderr
    assert kept(yaml.safe_load(result.stdout)) == ["shift", "pass_on", "unshift"]
    assert "(2 batches," in result.stdout and "and 3 nodes grown from first divergences" in result.stdout
    assert "batch 0: unshift (exceeds tolerance)" in result.stdout


def test_growth_stops_after_its_limit_and_says_so(cli, tmp_path):
    """One more unflagged overflow than MAX_GROWTH regions, on parallel branches: each run
    fixes one; the search stops, says where, and writes the plan as a failing one."""
    from onnx import helper
    from onnx_graphs import build, const, save, tensor

    from precisionaudit.prune.onnx import MAX_GROWTH

    branches = MAX_GROWTH + 1
    nodes = [helper.make_node("Mul", ["x", "k"], ["a"], name="scale")]
    nodes += [helper.make_node("Mul", ["a", "k"], [f"y{i}"], name=f"overflow_{i}") for i in range(branches)]
    outputs = [tensor(f"y{i}", [8]) for i in range(branches)]
    path = save(build(nodes, [tensor("x", [8])], outputs, [const("k", 1000.0)]), tmp_path)
    result = cli("plan", path, "--prune")
    assert result.exit_code == 0 and "out of tolerance" in result.stderr
    assert "did NOT pass" in result.stdout and kept(yaml.safe_load(result.stdout)) == []
    assert "tried, and not written since no plan passed" in result.stdout
    assert f"search stopped: still failing after {MAX_GROWTH} added regions (next: overflow_{MAX_GROWTH})" \
        in result.stdout


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
