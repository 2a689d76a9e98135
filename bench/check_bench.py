"""Plan + check benchmark: what the A/B check costs and how much fast GEMM work plans keep.

    python bench/check_bench.py            # the check_* demonstrations and the hazard samples below
    python bench/check_bench.py --grad     # with one backward per variant

For each sample: scan + plan (wall time), then ``check`` with that plan. Prints the model
executions the check used (forward/backward: a fixed 3 each, never a search), its wall time,
each variant's status, and ``gemm_flops_low_precision`` for the baseline, for the plan, and
for the same plan with whole-module entries (what keeping the flagged modules in fp32
would cost; the op-level plan is what precisionaudit writes). Prints a Markdown table (the
one in bench/README.md). Target (issue 3): plans fix every hazard demonstration and keep at
least 90% of GEMM FLOPs in low precision where the hazard is not itself a GEMM; exit
status 1 if a demonstration's plan fails or misses that.
"""
from __future__ import annotations

import argparse
import os
import platform
import sys
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

SAMPLES = [  # (file, mode, the hazard is a GEMM itself, demonstration that must pass)
    ("sample_models/check_mask_fill.py", "autocast", False, True),
    ("sample_models/check_exp_overflow.py", "pure", False, True),
    ("sample_models/check_variance.py", "autocast", False, True),
    ("sample_models/check_clean.py", "autocast", False, True),
    ("sample_models/pa107_mask_hazard.py", "autocast", False, False),
    ("sample_models/pa106_logits_hazard.py", "autocast", True, False),
    ("sample_models/pa104_lstm_hazard.py", "autocast", True, False),
]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--grad", action="store_true", help="check gradients too")
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    import torch

    from precisionaudit.check.pytorch.runner import run_check
    from precisionaudit.core.target import Target
    from precisionaudit.plan.file import Override, OverridePlan
    from precisionaudit.plan.pytorch import make_plan
    from precisionaudit.rules.engine import load_rules
    from precisionaudit.scanner import scan

    torch.set_num_threads(min(2, os.cpu_count() or 1))
    print(f"machine: {platform.processor() or platform.machine()}, {torch.get_num_threads()} threads, "
          f"torch {torch.__version__}, CUDA {'yes' if torch.cuda.is_available() else 'no'}\n")
    print("| sample | mode | overrides | scan+plan s | executions (fwd/bwd) | check s | baseline "
          "| planned | GEMM low: baseline | plan | whole-module plan |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    failed = []
    for path, mode, gemm_hazard, must_pass in SAMPLES:
        target = Target("float16", mode, "cuda")
        started = time.perf_counter()
        results, findings = scan([os.path.join(ROOT, path)], target, load_rules())
        plan, _ = make_plan(findings, target, results[0].graph)
        planning = time.perf_counter() - started
        report = run_check(os.path.join(ROOT, path), target, plan=plan, grad=args.grad)
        base, planned = report["variants"][1], report["variants"][2]
        whole = OverridePlan(target=plan.target, overrides=[Override(module=o.module) for o in plan.overrides],
                             keep_fp32_modules=plan.keep_fp32_modules)
        whole_share = run_check(os.path.join(ROOT, path), target, plan=whole)["variants"][2][
            "gemm_flops_low_precision"]
        share = planned["gemm_flops_low_precision"]
        runs = report["executions"]
        print(f"| {os.path.basename(path)} | {mode} | {len(plan.overrides)} | {planning:.1f} "
              f"| {runs['forward']}/{runs['backward']} | {report['wall_s']:.1f} | {base['status']} "
              f"| {planned['status']} | {_pct(base['gemm_flops_low_precision'])} | {_pct(share)} "
              f"| {_pct(whole_share)} |")
        if must_pass and (planned["status"] != "ok" or (not gemm_hazard and (share or 0) < 0.9)):
            failed.append(path)
    if failed:
        print(f"\nmissed the target: {', '.join(failed)}")
    return 1 if failed else 0


def _pct(x) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


if __name__ == "__main__":
    sys.exit(main())
