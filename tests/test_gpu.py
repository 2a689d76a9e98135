"""On a CUDA GPU only (issue 28): what precisionaudit emulates on CPU, checked against the real thing.

Each test skips cleanly without CUDA. bench/gpu_truth.py runs them on the device machine and
prints the full tables; these pin the facts the emulation stands on: the dtypes real
``torch.autocast("cuda")`` gives each op, ``check --device cuda``'s verdicts, and the training-step
hazards of issues 23/24 as real CUDA AMP shows them.
"""
import json
import os
import sys

import pytest
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
import gpu_truth  # noqa: E402

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

SAMPLES = os.path.join(ROOT, "sample_models")
DTYPE_MODELS = [os.path.join(SAMPLES, name) for name in (
    "check_variance.py", "pa101_softmax_hazard.py", "pa102_groupnorm_hazard.py", "pa105_exp_hazard.py",
    "pa106_logits_hazard.py", "pa112_rotary_hazard.py", "pa104_lstm_hazard.py")] + \
    [os.path.join(ROOT, "tests", "hf_models", "gpt2_tiny.py")]


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("path", DTYPE_MODELS, ids=[os.path.basename(p)[:-3] for p in DTYPE_MODELS])
def test_real_cuda_autocast_gives_every_op_the_dtypes_the_scan_records(path, dtype):
    row = gpu_truth.compare_dtypes(path, "get_model", dtype, "cuda")
    assert row["status"] == "ok", row
    assert row["mismatches"] == 0, (row["only_real"], row["only_emulated"])
    assert row["call_mismatches"] == 0, (row["calls_only_real"], row["calls_only_emulated"])


@pytest.mark.parametrize("name,mode,baseline", [
    ("check_mask_fill.py", "autocast", "error"), ("check_exp_overflow.py", "pure", "nonfinite"),
    ("check_variance.py", "autocast", "exceeds_tolerance"), ("check_clean.py", "autocast", "ok")])
def test_check_on_cuda_gives_the_emulated_verdict(name, mode, baseline):
    statuses = {}
    for device in ("cuda", "cpu-emulated"):
        _, out, _ = gpu_truth.cli("check", os.path.join(SAMPLES, name), "--mode", mode, "--device", device,
                                  "--format", "json")
        report = json.loads(out)
        assert report["device"] == device
        statuses[device] = report["variants"][1]["status"]
    assert statuses == {"cuda": baseline, "cpu-emulated": baseline}


def test_clip_before_unscale_sees_the_norm_times_the_loss_scale():
    result = gpu_truth.train_clip_before_unscale(gpu_truth.Side("cuda"), steps=1)
    bad, good = result["clip before unscale_"], result["unscale_ then clip"]
    assert bad["norm_seen_by_clip"] == pytest.approx(bad["true_grad_norm"] * bad["scale"], rel=1e-3)
    assert good["norm_seen_by_clip"] == pytest.approx(bad["true_grad_norm"], rel=1e-2)


def test_pure_fp16_adam_with_eps_1e_8_gives_nan_and_eps_1e_4_does_not():
    result = gpu_truth.train_adam_eps(gpu_truth.Side("cuda"), steps=3)
    assert result["fp16, eps=1e-8"]["nan_after_steps"] == 1
    assert result["fp16, eps=1e-4"]["nan_after_steps"] is None
    assert result["fp32, eps=1e-8"]["nan_after_steps"] is None


def test_pure_bf16_adamw_leaves_layernorm_weights_at_one_where_fp32_masters_move_them():
    result = gpu_truth.train_bf16_stall(gpu_truth.Side("cuda"), steps=20)
    assert result["pure bf16"]["layernorm_weights_moved_share"] == 0.0
    assert result["fp32 master weights, bf16 autocast"]["layernorm_weights_moved_share"] > 0.9
