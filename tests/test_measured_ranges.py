"""PA301 activation overflow on calibration data: flagged with --data (and the trained
weights), silent without; the generated plan fixes it, and check --weights --data proves it."""
import json

import pytest
from click.testing import CliRunner
from conftest import sample
from safetensors.torch import save_file

from precisionaudit.runtime.pytorch.model_file import import_model_file
from precisionaudit.cli import main
from precisionaudit.runtime.sources import DEFAULT_LOAD

CASES = {  # sample, data source, needs the trained weights
    "t5_ff": ("pa301_t5_ff", "example", True),
    "vae_decoder": ("pa301_vae_decoder", "example", True),
    "attention": ("pa301_attention", "calibration_batches", False),
}


@pytest.fixture(scope="module")
def weights(tmp_path_factory):
    """The trained-like checkpoints, written to safetensors files as a user would have them."""
    out = {}
    for case, (stem, _, trained) in CASES.items():
        if trained:
            path = tmp_path_factory.mktemp(case) / "model.safetensors"
            save_file(import_model_file(sample(f"{stem}_hazard.py")).trained_state_dict(), path)
            out[case] = str(path)
    return out


def _args(case, weights, kind="hazard", data=True):
    stem, source, trained = CASES[case]
    args = [sample(f"{stem}_{kind}.py")]
    if trained:
        args += ["--weights", weights[case]]
    if data:
        args += ["--data", source]
    return args


def _pa301_of(args):
    result = CliRunner().invoke(main, ["scan", *map(str, args), "--format", "json", "--select", "PA301"])
    report = json.loads(result.stdout)
    assert report["models"][0]["status"] == "ok", report
    return result.exit_code, report["findings"]


@pytest.mark.parametrize("case", sorted(CASES))
def test_flagged_with_data_with_value_batch_module_line(weights, case):
    code, findings = _pa301_of(_args(case, weights))
    assert code == 1 and findings, findings
    first = findings[0]
    assert first["severity"] == "error" and first["line"]
    assert first["evidence"]["measured"] > 65504
    assert f"calibration batch {first['evidence']['batch']}" in first["message"]
    assert f"{first['evidence']['measured']:.4g}" in first["message"]
    # the emulated fp16 run sees its first inf/NaN at the op that is reported
    assert first["evidence"]["first_nonfinite"] is True


EXPECTED_MODULES = {"t5_ff": ["block.ff.wo"], "vae_decoder": ["up.0.conv2", "up.1.conv2"],
                    "attention": ["attn"]}


@pytest.mark.parametrize("case", sorted(CASES))
def test_reported_where_it_starts_not_where_it_flows(weights, case):
    _, findings = _pa301_of(_args(case, weights))
    assert [f["module"] for f in findings] == EXPECTED_MODULES[case]


@pytest.mark.parametrize("case", sorted(CASES))
def test_silent_without_data(weights, case):
    assert _pa301_of(_args(case, weights, data=False)) == (0, [])


def test_silent_without_the_trained_weights():
    """The architecture's own init does not overflow: only the checkpoint does."""
    assert _pa301_of([sample("pa301_t5_ff_hazard.py"), "--data", "example"]) == (0, [])


def test_attention_silent_on_the_example_inputs():
    assert _pa301_of([sample("pa301_attention_hazard.py"), "--data", "example"]) == (0, [])


@pytest.mark.parametrize("case", sorted(CASES))
def test_clean_twin_is_silent(weights, case):
    assert _pa301_of(_args(case, weights, kind="clean")) == (0, [])


def test_a_near_miss_is_a_warning_within_the_headroom():
    path = sample("pa301_attention_hazard.py")
    code, findings = _pa301_of([path, "--data", "near_miss_batches"])
    assert code == 0 and [f["severity"] for f in findings] == ["warning"]
    assert 32752 < findings[0]["evidence"]["measured"] < 65504
    assert findings[0]["message"].endswith("within the 2x headroom of overflowing there")  # not "becomes inf"
    assert _pa301_of([path, "--data", "near_miss_batches", "--headroom", "1"]) == (0, [])


def test_batches_caps_the_data(weights):
    _, findings = _pa301_of([*_args("attention", weights), "--batches", "1"])
    assert findings and findings[0]["evidence"]["batch"] == 0


@pytest.mark.parametrize("case", sorted(CASES))
def test_plan_fixes_it_and_check_proves_it_on_the_data(cli, weights, case, tmp_path):
    args = _args(case, weights)
    plan = tmp_path / "plan.yaml"
    assert cli("plan", *args, "-o", plan).exit_code == 0
    before = json.loads(cli("check", *args, "--format", "json").stdout)
    assert before["passed"] is False and before["variants"][1]["status"] == "nonfinite"
    result = cli("check", *args, "--plan", plan, "--format", "json")
    after = json.loads(result.stdout)
    assert result.exit_code == 0 and after["passed"] is True, after
    assert after["variants"][2]["status"] == "ok"


PLANNED = {  # (module, ops) entries: a module that is nothing but the overflowing op is named whole
    "t5_ff": [("block", ["add", "layer_norm"]), ("block.ff.wo", None)],
    "vae_decoder": [("", ["group_norm", "add"]), ("up.*.conv2", None)],
    "attention": [("attn", ["matmul#1", "softmax"])],  # the logits GEMM, not probs @ v
}


@pytest.mark.parametrize("case", sorted(PLANNED))
def test_plan_keeps_the_op_and_its_chain_naming_whole_modules(cli, weights, case, tmp_path):
    from precisionaudit.plan.file import load_plan

    plan = tmp_path / "plan.yaml"
    assert cli("plan", *_args(case, weights), "-o", plan).exit_code == 0
    assert [(o.module, o.ops) for o in load_plan(str(plan)).overrides] == PLANNED[case]


def test_t5_plan_leaves_wi_in_fp16(cli, weights, tmp_path):
    """wo is planned as a module, not as `linear` in block: wi's GEMM stays in fp16."""
    plan = tmp_path / "plan.yaml"
    args = _args("t5_ff", weights)
    cli("plan", *args, "-o", plan)
    report = json.loads(cli("check", *args, "--plan", plan, "--format", "json").stdout)
    planned = report["variants"][2]
    assert planned["status"] == "ok" and 0.3 < planned["plan"]["gemm_flops_low_precision"] < 0.7


def test_every_batch_gets_the_run_under_the_target_and_only_hot_ones_the_reference():
    """The values of the program that runs are measured on every batch, not only where the
    fp32 values come near the dtype's max (code that branches on the dtype makes values the
    fp32 run never sees); the first inf/NaN is found on the batches that have one. The fp32
    reference is recorded only on those (a clean batch: one recorded forward)."""
    from precisionaudit.capture.pytorch import calibration
    from precisionaudit.core.numerics import Target
    from precisionaudit.core.values import ValueOptions

    path, target = sample("pa301_attention_hazard.py"), Target("float16", "autocast", "cuda")
    clean = calibration.measure_file(path, target, DEFAULT_LOAD,
                                     ValueOptions(data="example"))
    assert clean.low_runs == clean.batches == 1 and clean.first_nonfinite == {}
    assert clean.target_calls and clean.calls == {} and clean.reference_runs == 0
    hot = calibration.measure_file(path, target, DEFAULT_LOAD,
                                   ValueOptions(data="calibration_batches"))
    assert hot.low_runs == hot.batches == hot.reference_runs == 4 and set(hot.first_nonfinite) == {0, 1, 2, 3}
    assert set(hot.target_calls) == set(hot.calls) and hot.unmatched == 0


def test_the_scan_hint_plans_on_the_same_weights_and_data(weights):
    """A plan made without --data would not hold PA301's fix: the hint carries the flags."""
    result = CliRunner().invoke(main, ["scan", *map(str, _args("t5_ff", weights)), "--select", "PA301"])
    hint = next(line for line in result.stdout.splitlines() if line.startswith("hint:"))
    assert f"--weights {weights['t5_ff']} --data example -o amp_plan.yaml" in hint
