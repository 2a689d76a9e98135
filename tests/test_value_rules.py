"""PA302 (tiny values that round to 0 in the low dtype, feeding a pole) and PA303 (real
weights that do not fit the dtype an op reads them in): flagged with --data / --weights,
silent without and on the clean twins; the generated plan fixes them and
check --weights --data proves it."""
import json
import os

import pytest
import torch
from conftest import ROOT, sample
from safetensors.torch import save_file

from precisionaudit.runtime.pytorch.model_file import import_model_file

POLES = os.path.join(ROOT, "tests", "models", "tiny_poles.py")


@pytest.fixture(scope="module")
def folded(tmp_path_factory):
    """The folded checkpoint of the PA303 sample, as a user would have it."""
    path = tmp_path_factory.mktemp("pa303") / "folded.safetensors"
    save_file(import_model_file(sample("pa303_folded_hazard.py")).trained_state_dict(), path)
    return str(path)


def _findings(cli, *args, rule):
    result = cli("scan", *args, "--format", "json", "--select", rule)
    report = json.loads(result.stdout)
    assert report["models"][0]["status"] == "ok", report
    return result.exit_code, report["findings"]


# --------------------------------------------------------------------------- PA302
GATE = sample("pa302_gate_hazard.py")


def test_pa302_flags_the_op_whose_result_flushes_with_value_batch_module_line(cli):
    code, findings = _findings(cli, GATE, "--data", "calibration_batches", rule="PA302")
    assert code == 1 and len(findings) == 1
    f = findings[0]
    assert (f["module"], f["op"], f["severity"]) == ("gate", "sigmoid", "error")
    assert f["line"] == 26 and f["evidence"]["consumer_op"] == "log"
    assert f["evidence"]["consumer_line"] == 27
    # the gate's scores reach -81 on batch 1: sigmoid(-81) ~ 6e-36, far below fp16's 2.98e-8
    assert f["evidence"]["measured"] < 1e-30 and f["evidence"]["batch"] == 1
    assert 0 < f["evidence"]["flushed"] < 0.2
    assert f"calibration batch {f['evidence']['batch']}" in f["message"]
    assert f["evidence"]["measured_text"] in f["message"]
    # the emulated fp16 run goes non-finite first at the log the value feeds
    assert f["evidence"]["first_nonfinite"] is True
    assert f["fix"] == {"action": "keep_fp32", "module": "gate", "ops": ["sigmoid", "log"]}


def test_pa302_silent_without_data_on_the_example_and_on_the_clean_twin(cli):
    assert _findings(cli, GATE, rule="PA302") == (0, [])
    assert _findings(cli, GATE, "--data", "example", rule="PA302") == (0, [])
    assert _findings(cli, sample("pa302_gate_clean.py"), "--data", "calibration_batches",
                     rule="PA302") == (0, [])


def test_pa302_judges_the_divisor_not_the_numerator(cli):
    _, findings = _findings(cli, POLES, "--data", "example", rule="PA302")
    assert [(f["op"], f["evidence"]["consumer"]) for f in findings] == [("linear", "div_1")]


def test_pa302_is_silent_in_bfloat16(cli):
    """1e-9 and sigmoid(-81) are normal bf16 numbers: nothing rounds to 0."""
    assert _findings(cli, POLES, "--data", "example", "--dtype", "bfloat16", rule="PA302") == (0, [])


# --------------------------------------------------------------------------- PA303
FOLDED = sample("pa303_folded_hazard.py")


def test_pa303_flags_the_weight_at_the_op_that_casts_it(cli, folded):
    code, findings = _findings(cli, FOLDED, "--weights", folded, rule="PA303")
    assert code == 1 and len(findings) == 1
    f = findings[0]
    assert (f["module"], f["op"], f["line"], f["severity"]) == ("proj", "linear", 28, "error")
    assert f["evidence"]["param"] == "proj.weight" and f["evidence"]["measured"] == 2.0e5
    assert "proj.weight" in f["message"] and "2e+05" in f["message"]


def test_pa303_silent_without_weights_and_on_the_clean_twin(cli, folded):
    assert _findings(cli, FOLDED, rule="PA303") == (0, [])
    assert _findings(cli, sample("pa303_folded_clean.py"), "--weights", folded, rule="PA303") == (0, [])


def test_pa303_a_weight_autocast_keeps_in_fp32_is_judged_only_in_pure_mode(cli, tmp_path):
    weights = tmp_path / "w.safetensors"
    save_file(import_model_file(POLES).state_with_a_huge_norm_weight(), weights)
    assert _findings(cli, POLES, "--weights", weights, rule="PA303") == (0, [])
    _, findings = _findings(cli, POLES, "--weights", weights, "--mode", "pure", rule="PA303")
    assert [(f["module"], f["evidence"]["param"]) for f in findings] == [("norm", "norm.weight")]


def test_pa303_warns_when_a_share_of_a_weight_rounds_to_zero(cli, tmp_path):
    state = import_model_file(FOLDED).get_model().state_dict()
    state["head.weight"][:, :4] = 1e-9  # 4 of 32 columns: 12.5% of the values
    weights = tmp_path / "w.safetensors"
    save_file(state, weights)
    code, findings = _findings(cli, FOLDED, "--weights", weights, rule="PA303")
    assert code == 0 and [(f["evidence"]["param"], f["severity"]) for f in findings] == \
        [("head.weight", "warning")]
    assert findings[0]["evidence"]["flushed"] == pytest.approx(0.125)


# --------------------------------------------------------------------------- plans
@pytest.mark.parametrize("args", [
    pytest.param((GATE, "--data", "calibration_batches"), id="PA302"),
    pytest.param((FOLDED, "--weights", None), id="PA303"),
])
def test_plan_fixes_it_and_check_proves_it(cli, folded, tmp_path, args):
    args = [folded if a is None else a for a in args]
    plan = tmp_path / "plan.yaml"
    assert cli("plan", *args, "-o", plan).exit_code == 0
    # the header's check command runs on the weights / data the plan was made from
    assert f"check {args[0]} {args[1]} {args[2]} --plan" in plan.read_text()
    before = cli("check", *args, "--format", "json")
    assert before.exit_code == 1
    assert json.loads(before.stdout)["variants"][1]["status"] == "nonfinite"
    after = cli("check", *args, "--plan", plan, "--format", "json")
    report = json.loads(after.stdout)
    assert after.exit_code == 0 and report["passed"] is True, report
    assert report["variants"][2]["status"] == "ok"


def test_tiny_poles_model_really_divides_by_zero_in_fp16():
    """The test model's premise: the fp16 divisor is 0 where fp32 holds ~1e-9, and autocast
    divides the fp32 input by it (the widest dtype wins)."""
    module = import_model_file(POLES)
    x, = module.get_example_inputs()
    small = module.get_model().proj(x)
    assert (small != 0).all() and (small.half() == 0).any()
    assert torch.isinf(x / small.half().float()).any()


def test_the_torch_free_range_tables_are_torch_finfo():
    from precisionaudit.core.numerics import LARGEST_FINITE, SMALLEST_SUBNORMAL

    for name in ("float16", "bfloat16", "float32"):
        finfo = torch.finfo(getattr(torch, name))
        assert (LARGEST_FINITE[name], SMALLEST_SUBNORMAL[name]) == (finfo.max, finfo.smallest_normal * finfo.eps)


def test_masks_that_follow_the_dtype_are_not_overflows(cli):
    """A mask filled with finfo(dtype).min is -3.4e38 in the fp32 reference and -65504 under
    fp16: a fill that follows the dtype, not a value that grew past fp16's range."""
    assert _findings(cli, sample("pa107_mask_clean.py"), "--data", "example", rule="PA301") == (0, [])
