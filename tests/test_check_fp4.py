"""check and plan under --dtype nvfp4|mxfp4: the FP4 variants (forward, --grad, --train), their
tolerance, and the plan that keeps Linears in bf16 (plan/fp4.py) with the forms users paste."""
import json

import pytest
import torch
from click.testing import CliRunner
from conftest import sample

from precisionaudit.check.pytorch import quantized
from precisionaudit.check.tolerance import DEFAULTS, tolerance_for
from precisionaudit.cli import main
from precisionaudit.core.errors import UsageError
from precisionaudit.plan.fp4 import fewest_blocks
from precisionaudit.runtime.pytorch import fp4

HEAD = sample("pa612_fp4_head_hazard.py")  # 8 blocks and an nn.Linear head


def _json(*args, code=0):
    result = CliRunner().invoke(main, [str(a) for a in args])
    assert result.exit_code == code, result.output + result.stderr
    return json.loads(result.stdout)


def test_the_fp4_tolerances_are_torchaos_per_gemm_bars():
    assert (DEFAULTS["nvfp4"].gemm_snr_db, DEFAULTS["mxfp4"].gemm_snr_db) == (15.0, 12.0)
    assert DEFAULTS["nvfp4"].snr_db < DEFAULTS["nvfp4"].gemm_snr_db  # a model's output passes many GEMMs
    assert tolerance_for("mxfp4", gemm_snr=20).gemm_snr_db == 20
    with pytest.raises(UsageError, match="--gemm-snr judges FP8 GEMMs"):
        tolerance_for("bfloat16", gemm_snr=20)


def test_the_checks_fp4_linear_is_the_emulations():
    model = torch.nn.Sequential(torch.nn.Linear(64, 32), torch.nn.Linear(32, 24))
    choice = quantized.choose(model, "nvfp4", seed=3)
    assert choice.modules == ["0"] and "1" in choice.fallback  # 24 is no multiple of 16
    assert "NVFP4 GEMMs need both divisible by 16" in choice.fallback["1"]
    x = torch.randn(4, 64)
    with torch.no_grad(), quantized.quantized_linears(model, choice):
        got = model[0](x)
    want = fp4.linear(x, model[0].weight, model[0].bias, fmt="nvfp4")
    assert torch.equal(got, want) and choice.kind == "fp4" and choice.sums["0"][1] > 0
    assert quantized.choose(model, "mxfp4").modules == ["0"]  # 64 and 32: multiples of 32


def test_check_runs_bf16_then_fp4_and_reports_its_gemms():
    report = _json("check", HEAD, "--dtype", "nvfp4", "--format", "json")
    names = [v["name"] for v in report["variants"]]
    assert names == ["reference", "bfloat16", "baseline"] and report["passed"]
    baseline = report["variants"][-1]
    assert baseline["dtype"] == "nvfp4" and "recipe" not in baseline and "fp8" not in baseline
    assert baseline["fp4"]["format"] == "nvfp4" and baseline["fp4"]["linears"] == 17
    assert baseline["gemm_flops_fp4"] == 1.0
    assert all(15 < s < 20 for s in baseline["fp4"]["gemm_snr_db"].values())
    assert report["tolerance"]["gemm_snr_db"] == 15.0 and report["target"]["dtype"] == "nvfp4"
    assert any("Transformer Engine's reference quantizer" in n for n in report["notes"])


def test_a_gemm_below_its_bar_fails_the_variant_there():
    report = _json("check", HEAD, "--dtype", "mxfp4", "--gemm-snr", "30", "--format", "json", code=1)
    baseline = report["variants"][-1]
    assert baseline["status"] == "exceeds_tolerance"
    assert baseline["first_divergence"]["op"] == "linear"


def test_check_grad_back_propagates_through_the_fp4_gemms():
    report = _json("check", HEAD, "--dtype", "nvfp4", "--grad", "--format", "json")
    grads = report["variants"][-1]["gradients"]
    assert grads["nonfinite"] == 0 and 0.8 < grads["cosine"] < 0.999  # FP4's Dgrad and Wgrad: not bf16's


def test_check_train_trains_in_fp4_and_float8_train_stays_refused(tmp_path):
    report = _json("check", HEAD, "--dtype", "nvfp4", "--train", "--steps", "3", "--format", "json")
    baseline = report["variants"][-1]
    assert baseline["fp4"]["linears"] == 17 and len(baseline["loss"]) == 3
    assert any("every step's forward and backward" in n for n in report["notes"])
    refused = CliRunner().invoke(main, ["check", HEAD, "--dtype", "float8", "--train"])
    assert refused.exit_code == 2 and "not supported" in refused.stderr


def test_fewest_blocks_grow_from_the_ends():
    assert fewest_blocks([], 32) == (0, 0)
    assert fewest_blocks([30, 31], 32) == (0, 2)
    assert fewest_blocks([0, 31], 32) == (1, 1)
    assert fewest_blocks([0, 1, 2, 29], 32) == (3, 3)
    assert fewest_blocks([28], 32) == (0, 4)
    assert fewest_blocks([15], 32) == (16, 0)  # fewer from the start
    assert fewest_blocks([15], 30) == (0, 15)  # a tie goes to the end


def test_plan_keeps_the_recipes_blocks_and_the_head_and_writes_every_form(tmp_path):
    out = tmp_path / "plan.yaml"
    result = CliRunner().invoke(main, ["plan", HEAD, "--dtype", "nvfp4", "-o", str(out)])
    assert result.exit_code == 0, result.stderr
    text = out.read_text()
    assert "keep_out_of_fp4: [layers.7.up, layers.7.down, lm_head]" in text
    for form in ("NVFP4TrainingConfig", "filter_fn=", "te.autocast(enabled=False)", "NVFP4BlockScaling",
                 "--num-layers-at-end-in-bf16 1", "mtq.NVFP4_DEFAULT_CFG", "'layers.7.up.*'",
                 'scheme="NVFP4", ignore=', "77.8% of the Linear FLOPs stay in NVFP4"):
        assert form in text, form
    assert "3 Linear(s) to keep out of FP4" in result.stderr
    # the plan proves itself: the planned variant leaves those three in bf16
    report = _json("check", HEAD, "--dtype", "nvfp4", "--plan", out, "--format", "json")
    planned = report["variants"][-1]
    assert planned["name"] == "planned" and planned["fp4"]["linears"] == 14
    assert planned["fp4"]["kept_out"] == ["layers.7.up", "layers.7.down", "lm_head"]
    assert planned["outputs"][0]["snr_db"] > report["variants"][-2]["outputs"][0]["snr_db"]


def test_plan_with_data_keeps_what_the_measurements_call_for():
    plan = CliRunner().invoke(main, ["plan", sample("pa617_fp4_wgrad_hazard.py"), "--dtype", "nvfp4",
                                                     "--data", "example"])
    assert plan.exit_code == 0, plan.stderr
    assert "keep_out_of_fp4: [proj]" in plan.stdout and "measured FP4 error is past its bound: proj" in plan.stdout
    clean = CliRunner().invoke(main, ["plan", sample("pa617_fp4_wgrad_clean.py"), "--dtype", "nvfp4",
                                                      "--data", "example"])
    assert "keep_out_of_fp4" not in clean.stdout.split("version: 1")[1]


def test_plan_drops_the_unaligned_layers_and_names_mxfp4s_libraries():
    plan = CliRunner().invoke(main, ["plan", sample("pa611_fp4_dims_hazard.py"), "--dtype", "mxfp4"])
    assert plan.exit_code == 0, plan.stderr
    assert "keep_out_of_fp4: [block.up, block.down]" in plan.stdout
    for form in ("MXDynamicActivationMXWeightConfig", "no MXFP4 recipe", "MXFP4_DEFAULT_CFG", 'scheme="MXFP4"'):
        assert form in plan.stdout, form


def test_fp4_plans_take_neither_train_nor_prune_and_onnx_takes_no_fp4(tmp_path):
    for flag in ("--train", "--prune"):
        result = CliRunner().invoke(main, ["plan", HEAD, "--dtype", "nvfp4", flag])
        assert result.exit_code == 2 and "keep out of FP4" in result.stderr, result.stderr
    onnx = tmp_path / "m.onnx"
    onnx.write_bytes(b"")
    result = CliRunner().invoke(main, ["check", str(onnx), "--dtype", "nvfp4"])
    assert result.exit_code == 2 and "nvfp4" in result.stderr
