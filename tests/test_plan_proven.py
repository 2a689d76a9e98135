"""A plan ``plan`` writes never makes the model raise (its forward runs once on fake tensors
first), pure-mode regions hand GEMMs one dtype, and with ``--data`` the plan is checked on
the data and grown where it fails (issue 41, items 4 and 5)."""
import copy
import json

import pytest
import torch
from conftest import sample

from precisionaudit.apply import pytorch as apply_module
from precisionaudit.apply.pytorch import apply_plan, to_low_precision
from precisionaudit.check.pytorch.plan_forward import plan_forward_error
from precisionaudit.core.numerics import Target
from precisionaudit.plan.file import OverridePlan, load_plan, parse_plan
from precisionaudit.runtime.pytorch.source import open_source
from precisionaudit.runtime.sources import DEFAULT_LOAD

GEMMA_NORM = sample("pa116_offset_norm_hazard.py")  # a Gemma-style RMSNorm before a Linear
PURE_BF16 = ["--dtype", "bfloat16", "--mode", "pure"]
KEEP_PROJ = {"version": 1, "target": {"dtype": "bfloat16", "mode": "pure", "device": "cuda"},
             "overrides": [], "keep_fp32_modules": ["proj"]}


def check_json(cli, *args):
    result = cli("check", *args, "--format", "json")
    return result, json.loads(result.stdout)


def test_a_gemma_norm_plan_in_pure_bf16_runs_and_passes(cli, tmp_path):
    """The plan keeps the norm's weight in fp32 and runs ``1 + weight`` and the product in
    fp32: the product left the region in fp32 and the next Linear (bf16 weights) raised
    "mat1 and mat2 must have the same dtype". A kept weight stands in for the low dtype it
    has without the plan, so the region's result goes back to bf16."""
    plan = tmp_path / "plan.yaml"
    assert cli("plan", GEMMA_NORM, *PURE_BF16, "-o", plan).exit_code == 0
    assert load_plan(str(plan)).keep_fp32_modules == ["norm"]
    result, report = check_json(cli, GEMMA_NORM, *PURE_BF16, "--plan", plan)
    planned = report["variants"][-1]
    assert planned["status"] == "ok" and "defect" not in planned and result.exit_code == 0, planned


def test_a_kept_module_no_override_names_runs_as_a_whole_fp32_region():
    """keep_fp32_modules: [proj] alone: proj's fp32 weights meet its bf16 input in one fp32
    region (inputs cast up, the result back to bf16), so the GEMM gets one dtype."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Linear(8, 8))
    plan = parse_plan({**KEEP_PROJ, "keep_fp32_modules": ["1"]}, "p.yaml")
    x = torch.randn(2, 8)
    first = copy.deepcopy(model[0]).to(torch.bfloat16)
    want = model[1](first(x.bfloat16()).float())  # the kept Linear in fp32 on the bf16 activations
    to_low_precision(model, plan)
    assert model[1].weight.dtype == torch.float32 and model[0].weight.dtype == torch.bfloat16
    with apply_plan(model, plan, warn=False):
        out = model(x.bfloat16())
    assert out.dtype == torch.bfloat16 and torch.equal(out, want.bfloat16())


@pytest.fixture
def kept_modules_unguarded(monkeypatch):
    """apply_plan without the whole-region guard of kept modules: a plan that makes the model raise."""
    monkeypatch.setattr(apply_module, "_keep_kept_modules_in_fp32", lambda *args: None)


def test_the_fake_forward_names_the_gemm_a_plan_hands_two_dtypes(kept_modules_unguarded):
    error = plan_forward_error(open_source(GEMMA_NORM, DEFAULT_LOAD), Target("bfloat16", "pure", "cuda"),
                               parse_plan(KEEP_PROJ, "p.yaml"))
    assert error is not None and "addmm" in error and "bfloat16 and float32" in error


@pytest.mark.parametrize("kept", ["norm", "proj"])
def test_the_fake_forward_passes_a_kept_module_with_its_guard(kept):
    plan = OverridePlan(target=KEEP_PROJ["target"], keep_fp32_modules=[kept])
    assert plan_forward_error(open_source(GEMMA_NORM, DEFAULT_LOAD), Target("bfloat16", "pure", "cuda"), plan) is None


def test_check_says_a_plan_that_makes_the_model_raise_is_a_plan_defect(cli, tmp_path, kept_modules_unguarded):
    plan = tmp_path / "plan.yaml"
    plan.write_text(json.dumps(KEEP_PROJ))
    result, report = check_json(cli, GEMMA_NORM, *PURE_BF16, "--plan", plan)
    baseline, planned = report["variants"][1:]
    assert baseline["status"] == "ok" and planned["status"] == "error" and planned["defect"] == "plan"
    assert any("a defect of the plan, not of the model" in w for w in report["warnings"])
    assert result.exit_code == 1


def test_plan_does_not_write_a_plan_whose_forward_fails(cli, tmp_path, monkeypatch):
    from precisionaudit.check.pytorch import plan_forward

    monkeypatch.setattr(plan_forward, "plan_forward_error_of", lambda *args: "mm is given float16 and float32")
    out = tmp_path / "plan.yaml"
    result = cli("plan", sample("check_exp_overflow.py"), "--mode", "pure", "-o", out)
    assert result.exit_code == 2 and "internal error, please report" in result.stderr
    assert "mm is given float16 and float32" in result.stderr and not out.exists()


def test_plan_with_data_grows_a_plan_that_fails_its_check(cli, tmp_path, monkeypatch):
    """The plan made from the findings is checked on --data; where it fails, it grows from the
    failing run's first divergence until it passes, and its header says what was added and
    why. Here the findings plan nothing (an empty plan), so all of it is grown."""
    from precisionaudit.plan import pytorch as planner

    monkeypatch.setattr(planner, "make_plan", lambda findings, target, *rest: (OverridePlan(target=target.as_dict()), []))
    out = tmp_path / "plan.yaml"
    path = sample("check_exp_overflow.py")
    result = cli("plan", path, "--mode", "pure", "--data", "example", "-o", out)
    assert result.exit_code == 0, result.output
    header = [line for line in out.read_text().splitlines() if line.startswith("#")]
    assert any("the plan made from the findings did not pass (nonfinite" in line for line in header)
    grown = next(line for line in header if "grown until it passed" in line)
    assert "gate" in grown
    assert load_plan(str(out)).overrides  # the regions grown
    result, report = check_json(cli, path, "--mode", "pure", "--plan", out)
    assert report["passed"], report["variants"][-1]


def test_plan_with_data_says_the_plan_passed_its_check(cli, tmp_path):
    out = tmp_path / "plan.yaml"
    assert cli("plan", sample("check_exp_overflow.py"), "--mode", "pure", "--data", "example", "-o", out).exit_code == 0
    header = out.read_text()
    assert "# checked on --data example (" in header and "): passed" in header and "grown" not in header
