"""plan --prune's search: what growing a plan from the check's own evidence costs and finds.

    python bench/search_bench.py            # the check demonstrations and tests/demos

For each demonstration, two starts under its target: the static plan (what ``plan`` writes
from the findings) and an empty plan (as if no rule had flagged anything: what the search
alone finds). Each is pruned on the example inputs as ``plan --prune`` does (the search adds
the first divergence of each failing run in fp32, then pruning drops what is not needed).
Prints, per start: the model runs (the fp32 reference included), the wall time, the
entries written, the regions the search added, and whether the written plan passed its
run. Quoted in bench/README.md ("plan --prune's search").
"""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

# (model file, dtype, mode): each demonstration under the target whose check it fails
DEMOS = [
    ("sample_models/check_exp_overflow.py", "float16", "pure"),
    ("sample_models/check_mask_fill.py", "float16", "autocast"),
    ("sample_models/check_variance.py", "float16", "pure"),
    ("tests/demos/exp_gates.py", "float16", "pure"),
    ("tests/demos/layernorm_eps.py", "float16", "pure"),
    ("tests/demos/mask_fill.py", "float16", "autocast"),
    ("tests/demos/positions_cumsum.py", "bfloat16", "pure"),
    ("tests/demos/t5_ff.py", "float16", "pure"),
]


def static_plan(path, dtype, mode):
    from precisionaudit.plan.file import load_plan

    out = os.path.join(tempfile.mkdtemp(prefix="search_bench"), "plan.yaml")
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "precisionaudit", "plan", path, "--dtype", dtype, "--mode", mode,
                    "-o", out], check=True, capture_output=True, cwd=ROOT)
    return load_plan(out), time.perf_counter() - started


def entries(plan) -> str:
    parts = [f"{o.module or '<root>'}[{','.join(o.ops) if o.ops else '*'}]" for o in plan.overrides]
    return "; ".join(parts + [f"keep {m}" for m in plan.keep_fp32_modules]) or "(none)"


def main():
    from precisionaudit.core.target import Target
    from precisionaudit.plan.file import OverridePlan
    from precisionaudit.prune.pytorch import pruned_plan

    print(f"| demonstration | target | start | static plan (s) | runs | prune wall (s) | written | "
          f"added by the search | passed |")
    print("|---|---|---|---:|---:|---:|---|---|---|")
    for rel, dtype, mode in DEMOS:
        path = os.path.join(ROOT, rel)
        target = Target(dtype, mode, "cuda")
        static, static_s = static_plan(path, dtype, mode)
        for start, plan in (("static plan", static), ("empty", OverridePlan(target=static.target))):
            started = time.perf_counter()
            pruned = pruned_plan(plan, path, target, 0)
            wall = time.perf_counter() - started
            print(f"| {os.path.basename(rel)} | {dtype} {mode} | {start} | "
                  f"{static_s:.1f} | {pruned.runs} | {wall:.1f} | {entries(pruned.plan)} | "
                  f"{'; '.join(pruned.added) or '-'} | {'yes' if pruned.passed else 'NO: ' + str(pruned.stuck)} |")


if __name__ == "__main__":
    main()
