"""Issue 25's extended incident set: documented fp16/bf16 failures of real model code (and
issue 36's two held-out pure-fp16 cases, SD 2.1's attention and Qwen's stop-word scores).

    python bench/incident_bench.py [NAME ...]      # every incident, or the ones named

Each incident in ``bench/incidents/`` is a reproduction (``<name>.py``, its header names the
thread, what failed and the upstream fix) with its fixed twin (``<name>_fixed.py``), run
under the target the incident happened in. Per incident, each step a ``precisionaudit``
process as a user runs it:

1. caught: ``scan --data example`` reports a warning-or-above finding at the root-cause op;
2. fixed twin clean: no warning-or-above finding there (any other finding is listed), and
   the twin's own ``check`` status (the reproduction's sanity: the upstream fix passes);
3. check fails: ``check`` of the hazard without a plan does not pass;
4. plan fixes: ``plan --data example`` then ``check --plan`` passes; and ``plan --prune``'s
   search (which grows a failing plan from the check's first divergence, then prunes), run
   in this process from that static plan and from an empty one (bench/search_bench.py's two
   starts; the same as ``plan --prune --data example``, whose runs use the example inputs,
   the triggering ones here): does the plan it writes pass, in how many model runs and how
   much wall time.

Prints one markdown table; quoted in bench/README.md ("The extended incident set").
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
INCIDENTS = os.path.join(ROOT, "bench", "incidents")
MISSED: set = set()  # incidents no rule catches yet (the README says what a rule would need)
RANK = {"error": 0, "warning": 1, "info": 2}


@dataclass(frozen=True)
class Incident:
    name: str
    dtype: str
    mode: str
    module: str  # the root cause: the module ...
    ops: tuple  # ... and the ops, any of which may carry the finding
    plan_can_fix: bool  # False: only a code change fixes it (the header says why)

    def path(self, fixed=False) -> str:
        return os.path.join(INCIDENTS, f"{self.name}{'_fixed' if fixed else ''}.py")

    @property
    def flags(self) -> list:
        return ["--dtype", self.dtype, "--mode", self.mode]


INCIDENT_SET = [
    Incident("deberta_scale", "float16", "autocast", "layer.attention", ("bmm",), True),
    Incident("favor_feature_map", "float16", "autocast", "attn", ("matmul", "div"), True),
    Incident("focal_loss", "float16", "pure", "", ("sigmoid", "sub", "rsub", "log"), True),
    Incident("kvpress_fake_keys", "float16", "pure", "attn", ("mul", "div", "where"), True),
    Incident("normalize_eps", "float16", "pure", "block.norm", ("normalize", "clamp_min", "div"), True),
    Incident("moe_scaling", "float16", "pure", "layer.mlp", ("mul", "add"), True),
    Incident("box_iou_area", "float16", "pure", "head", ("mul", "add", "sub", "div"), True),
    # issue 36's two held-out pure-fp16 cases, rebuilt from the upstream code
    Incident("sd21_attention", "float16", "pure", "attn1", ("baddbmm",), True),
    Incident("qwen_stop_words", "float16", "pure", "", ("div",), True),
    # issue 41: CUDA's atomic fp16 partial sums in nll_loss2d (the emulation had them in fp32)
    Incident("nll_loss2d_mean", "float16", "pure", "", ("nll_loss",), True),
]


def cli(*args) -> tuple[int, str, float]:
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "precisionaudit", *map(str, args)], capture_output=True,
                          text=True, cwd=ROOT)
    return done.returncode, done.stdout + done.stderr, time.perf_counter() - started


def warning_findings(path, flags) -> list:
    code, out, _ = cli("scan", path, *flags, "--data", "example", "--format", "json", "--exit-zero")
    if code != 0:
        raise SystemExit(f"scan {path} failed ({code}): {out[-400:]}")
    report = json.loads(out[out.index("{"):])
    return [f for f in report["findings"] if RANK[f["severity"]] <= RANK["warning"]]


def at_root(finding, incident) -> bool:
    return finding.get("module") == incident.module and finding.get("op") in incident.ops


def label(findings) -> str:
    return ", ".join(f"{f['rule']} {f['severity']} {f.get('module') or '<root>'}[{f.get('op')}]"
                     for f in findings) or "-"


def check(path, flags, plan=None) -> dict:
    code, out, _ = cli("check", path, *flags, "--format", "json", *(["--plan", plan] if plan else []))
    if code == 2:
        return {"passed": False, "status": "exit 2: " + out.strip().splitlines()[-1][:80]}
    report = json.loads(out[out.index("{"):])
    variant = report["variants"][-1]
    return {"passed": report["passed"], "status": variant["status"],
            "divergence": variant.get("first_divergence")}



def entries(plan) -> str:
    from precisionaudit.plan.file import OverridePlan, load_plan

    plan = plan if isinstance(plan, OverridePlan) else load_plan(plan)
    parts = [f"{o.module or '<root>'}[{','.join(o.ops) if o.ops else '*'}]" for o in plan.overrides]
    return "; ".join(parts + [f"keep {m}" for m in plan.keep_fp32_modules]) or "(empty)"


def starts(static_path, incident):
    """The two starts of plan --prune's search: the static plan (from --data) and an empty one."""
    from precisionaudit.plan.file import OverridePlan, load_plan

    static = load_plan(static_path)
    return [("static plan", static), ("empty", OverridePlan(target=static.target))]


def search(incident, plan) -> dict:
    """plan --prune's search and pruning from ``plan``, on the example inputs (seed 0), as
    bench/search_bench.py runs it: one warm process, the fp32 reference run included."""
    from precisionaudit.core.target import Target
    from precisionaudit.prune.pytorch import pruned_plan

    started = time.perf_counter()
    pruned = pruned_plan(plan, incident.path(), Target(incident.dtype, incident.mode, "cuda"), 0)
    return {"written": entries(pruned.plan), "runs": pruned.runs, "wall_s": time.perf_counter() - started,
            "passed": pruned.passed, "added": "; ".join(pruned.added) or "-", "stuck": pruned.stuck}


def run(incident: Incident) -> dict:
    out = tempfile.mkdtemp(prefix=f"incident_bench_{incident.name}_")
    hazard, fixed = incident.path(), incident.path(fixed=True)
    found = warning_findings(hazard, incident.flags)
    twin = warning_findings(fixed, incident.flags)
    baseline = check(hazard, incident.flags)
    twin_check = check(fixed, incident.flags)
    static = os.path.join(out, "static.yaml")
    code, text, static_s = cli("plan", hazard, *incident.flags, "--data", "example", "-o", static)
    planned = check(hazard, incident.flags, static) if code == 0 else {"passed": False, "status": text[-80:]}
    searches = {start: search(incident, plan) for start, plan in starts(static, incident)}
    return {
        "incident": incident.name, "target": f"{incident.dtype} {incident.mode}",
        "root": f"{incident.module or '<root>'}[{'/'.join(incident.ops)}]",
        "caught": any(at_root(f, incident) for f in found), "found": label(found),
        "twin_clean": not any(at_root(f, incident) for f in twin), "twin": label(twin),
        "check_fails": not baseline["passed"], "baseline": baseline["status"],
        "twin_check": twin_check["status"],
        "static": entries(static) if os.path.exists(static) else "(none)", "static_s": static_s,
        "static_passes": planned["passed"], "static_status": planned["status"],
        "searches": searches,
    }


def yes(flag, detail="") -> str:
    return ("yes" if flag else "NO") + (f" ({detail})" if detail else "")


def main(names):
    chosen = [i for i in INCIDENT_SET if not names or i.name in names]
    print("| incident | target | root cause | caught | warning+ findings | fixed twin clean | twin's warning+ "
          "findings | check fails | static plan (--data) | static plan passes | plan (s) | prune from | "
          "plan written | added by the search | runs | prune (s) | pruned passes |")
    print("|---|---|---|---|---|---|---|---|---|---|---:|---|---|---|---:|---:|---|")
    rows = []
    for incident in chosen:
        r = run(incident)
        rows.append(r)
        print(json.dumps(r), file=sys.stderr, flush=True)
        for start, p in r["searches"].items():
            print(f"| {r['incident']} | {r['target']} | {r['root']} | {yes(r['caught'])} | {r['found']} | "
                  f"{yes(r['twin_clean'])} | {r['twin']}; its check: {r['twin_check']} | {yes(r['check_fails'], r['baseline'])} | {r['static']} | "
                  f"{yes(r['static_passes'], r['static_status'])} | {r['static_s']:.1f} | {start} | {p['written']} | "
                  f"{p['added']} | {p['runs']} | {p['wall_s']:.1f} | {yes(p['passed'], p['stuck'] or '')} |",
                  flush=True)
    n = len(rows)
    print(f"\ncaught {sum(r['caught'] for r in rows)}/{n}; fixed twins clean {sum(r['twin_clean'] for r in rows)}/{n}; "
          f"check fails {sum(r['check_fails'] for r in rows)}/{n}; static plan passes "
          f"{sum(r['static_passes'] for r in rows)}/{n}; pruned from the static plan passes "
          f"{sum(r['searches']['static plan']['passed'] for r in rows)}/{n}; from empty "
          f"{sum(r['searches']['empty']['passed'] for r in rows)}/{n}")


if __name__ == "__main__":
    main(sys.argv[1:])
