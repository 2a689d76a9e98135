"""Plan + check benchmark: what the A/B check costs and how much fast GEMM work plans keep.

    python bench/check_bench.py            # the check_* demonstrations and the hazard samples below
    python bench/check_bench.py --grad     # with one backward per variant
    python bench/check_bench.py --gpt2 3   # only the GPT-2-small row, 3 repeats
    python bench/check_bench.py --gpt2 3 --fp8   # also check --dtype float8, and Pythia-160m (2 layers)

For each sample: scan + plan (wall time), then ``check`` with that plan. Prints the model
executions the check used (forward/backward: a fixed 3 each, never a search), its wall time,
each variant's status, and ``gemm_flops_low_precision`` for the baseline, for the plan, and
for the same plan with whole-module entries (what keeping the flagged modules in fp32
would cost; the op-level plan is what precisionaudit writes). Prints a Markdown table (the
one in bench/README.md). Target (issue 3): plans fix every hazard demonstration and keep at
least 90% of GEMM FLOPs in low precision where the hazard is not itself a GEMM; exit
status 1 if a demonstration's plan fails or misses that.

The GPT-2-small row (issue 13; ``bench/models/gpt2_small.py``, 124 M parameters, batch
2 x 256) times ``precisionaudit check`` as a user runs it, a process of its own, against its
floor measured in the same run: a process that starts the interpreter, builds the same model
and inputs and runs three plain fp32 forwards. Peak RSS of the check against a process that
runs one fp32 forward. Medians over ``--gpt2 N`` repeats. Target: both ratios <= 2.
``--fp8`` also times ``check --dtype float8`` (tensorwise) in the same repeats (issue 26: the
same budget), and the same pair on ``bench/zoo/fp8_zoo.py``'s Pythia-160m (real width, 2 layers:
nn.Linear, so its GEMMs do run in FP8, where GPT-2's Conv1D ones do not).
"""
from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
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
    parser.add_argument("--gpt2", type=int, default=0, metavar="N",
                        help="only the GPT-2-small row, N repeats (0: the demonstrations, then 1 repeat)")
    parser.add_argument("--fp8", action="store_true", help="with --gpt2: also check --dtype float8, and "
                        "Pythia-160m (nn.Linear GEMMs) the same way")
    args = parser.parse_args()
    if args.gpt2:
        return gpt2_row(args.gpt2, args.fp8)
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
    return max(1 if failed else 0, gpt2_row(1))


GPT2 = os.path.join(HERE, "models", "gpt2_small.py")
FP8_ZOO = os.path.join(HERE, "zoo", "fp8_zoo.py")
FORWARDS = """
import sys, importlib.util, torch
torch.set_num_threads({threads})
spec = importlib.util.spec_from_file_location("m", {path!r}); m = importlib.util.module_from_spec(spec)
spec.loader.exec_module(m)
torch.manual_seed(0); model = m.{entry}().eval(); torch.manual_seed(0); inputs = m.{inputs}()
args, kwargs = (inputs, {{}}) if isinstance(inputs, tuple) else ((), inputs) if isinstance(inputs, dict) else ((inputs,), {{}})
with torch.no_grad():
    for _ in range({n}):
        model(*args, **kwargs)
"""


def _child(argv) -> tuple[float, float, float]:
    """(wall s, peak RSS MiB, CPU s) of one process running ``argv``."""
    started = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - started
    if os.waitstatus_to_exitcode(status) not in (0, 1):
        raise SystemExit(f"{argv[:4]} failed: {proc.stderr.read().decode()[-2000:]}")
    return wall, usage.ru_maxrss / 1024, usage.ru_utime + usage.ru_stime


def gpt2_row(repeat: int, fp8: bool = False) -> int:
    """The check of GPT-2 small against its floor; 1 if a ratio is above 2. ``fp8``: also
    ``check --dtype float8``, and both checks of Pythia-160m against its own floor."""
    status = _model_rows(repeat, "GPT-2 small (124 M, batch 2x256)", GPT2, "get_model", "get_example_inputs", fp8)
    if fp8:
        status |= _model_rows(repeat, "Pythia-160m (real width, 2 layers, batch 2x16; fp8_zoo.py)", FP8_ZOO,
                              "get_pythia_160m", "inputs_pythia_160m", fp8)
    return status


def _model_rows(repeat, title, path, entry, inputs, fp8) -> int:
    threads = min(2, os.cpu_count() or 1)
    env_threads = {**os.environ, "OMP_NUM_THREADS": str(threads)}
    os.environ.update(env_threads)
    check = [sys.executable, "-m", "precisionaudit", "check", path, "--format", "json", "--entry", entry,
             "--inputs", inputs]
    checks = {"check": ("`precisionaudit check` (fp16 autocast, cpu-emulated)", check)}
    if fp8:
        checks["check_fp8"] = ("`check --dtype float8` (tensorwise, cpu-emulated)", [*check, "--dtype", "float8"])
    rows = {**{k: [] for k in checks}, "floor": [], "one": []}
    for _ in range(repeat):
        for n, key in ((3, "floor"), (1, "one")):
            code = FORWARDS.format(threads=threads, path=path, entry=entry, inputs=inputs, n=n)
            rows[key].append(_child([sys.executable, "-c", code]))
        for key, (_, argv) in checks.items():
            rows[key].append(_child(argv))
    wall = {k: statistics.median(w for w, _, _ in v) for k, v in rows.items()}
    rss = {k: statistics.median(r for _, r, _ in v) for k, v in rows.items()}
    cpu = {k: statistics.median(c for _, _, c in v) for k, v in rows.items()}
    print(f"\n{title}, medians of {repeat}, {threads} threads "
          "(CPU s: user + system, a cross-check when the machine is shared):\n")
    print("| | wall s | CPU s | peak RSS MiB |\n|---|---:|---:|---:|")
    for key, (label, _) in checks.items():
        print(f"| {label} | {wall[key]:.1f} | {cpu[key]:.1f} | {rss[key]:.0f} |")
    print(f"| floor: start-up + build + 3 fp32 forwards | {wall['floor']:.1f} | {cpu['floor']:.1f} | "
          f"{rss['floor']:.0f} |")
    print(f"| start-up + build + 1 fp32 forward | {wall['one']:.1f} | {cpu['one']:.1f} | {rss['one']:.0f} |")
    status = 0
    for key, (label, _) in checks.items():
        time_ratio, rss_ratio = wall[key] / wall["floor"], rss[key] / rss["one"]
        name = label.split(" (")[0]
        print(f"| **{name} / floor (target <= 2)** | **{time_ratio:.2f}** | {cpu[key] / cpu['floor']:.2f} | |")
        print(f"| **{name} RSS / one forward's (target <= 2)** | | | **{rss_ratio:.2f}** |")
        status |= time_ratio > 2 or rss_ratio > 2
    return int(status)


def _pct(x) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


if __name__ == "__main__":
    sys.exit(main())
