"""Demonstrations of the fix-and-prove loop (issue 13): small models with documented
fp16/bf16 failure patterns, pure and autocast, fp16 and bf16. For each, the baseline check
fails, the static plan passes, and the pruned plan (a subset of it) passes too; every
verdict here comes from a ``check`` run of its own, not from the planner's claims."""
import json
import os

import pytest

from precisionaudit.plan.file import load_plan

DEMOS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "demos")

CASES = [  # model file, dtype, mode, what the baseline does
    ("exp_gates.py", "float16", "pure", "nonfinite"),  # hand-written softmax, exp overflows
    ("mask_fill.py", "float16", "autocast", "error"),  # -1e9 mask on fp16 scores
    ("mask_fill.py", "float16", "pure", "error"),
    ("rotary_positions.py", "float16", "pure", "exceeds_tolerance"),  # positions past 2048
    ("rotary_positions.py", "float16", "autocast", "exceeds_tolerance"),
    ("rotary_positions.py", "bfloat16", "pure", "exceeds_tolerance"),  # positions past 256
    ("rotary_positions.py", "bfloat16", "autocast", "exceeds_tolerance"),
    ("positions_cumsum.py", "bfloat16", "pure", "exceeds_tolerance"),  # cumsum position ids
    ("t5_ff.py", "float16", "pure", "exceeds_tolerance"),  # scaled wo, RMSNorm stats in fp32
    ("layernorm_eps.py", "float16", "pure", "nonfinite"),  # eps=1e-12 underflows, rsqrt(0)
]


def check(cli, path, flags, plan=None):
    args = ["check", path, *flags, "--format", "json"] + (["--plan", plan] if plan else [])
    result = cli(*args)
    return result, json.loads(result.stdout)


def entries(plan_path) -> set:
    plan = load_plan(str(plan_path))
    return {(o.module, op) for o in plan.overrides for op in (o.ops or ["*"])} | \
        {("keep", m) for m in plan.keep_fp32_modules}


@pytest.mark.parametrize("name,dtype,mode,baseline", CASES,
                         ids=[f"{n[:-3]}-{d}-{m}" for n, d, m, _ in CASES])
def test_baseline_fails_and_the_static_and_pruned_plans_pass(cli, tmp_path, name, dtype, mode, baseline):
    path, flags = os.path.join(DEMOS, name), ["--dtype", dtype, "--mode", mode]
    static, pruned = tmp_path / "static.yaml", tmp_path / "pruned.yaml"
    assert cli("plan", path, *flags, "-o", static).exit_code == 0
    result, report = check(cli, path, flags, static)
    assert report["variants"][1]["status"] == baseline
    assert report["variants"][2]["status"] == "ok" and result.exit_code == 0, report["variants"][2]
    assert cli("plan", path, *flags, "--prune", "-o", pruned).exit_code == 0
    assert entries(pruned) <= entries(static) and entries(pruned)
    result, report = check(cli, path, flags, pruned)
    assert report["variants"][2]["status"] == "ok" and result.exit_code == 0, report["variants"][2]
