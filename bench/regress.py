"""The regression corpus: real inputs nobody here wrote, run as a user runs them, against a
committed baseline of their outcomes.

    python bench/regress.py               # the whole corpus (under 30 minutes on 2 cores)
    python bench/regress.py --subset      # the part .ci/run runs after the tests (about 5 minutes)
    python bench/regress.py -k gpt2       # only the cases whose id contains "gpt2"
    python bench/regress.py --update      # record what ran as the baseline (say why in the commit)

Each suite holds the cases it was written with; regressions hide between them. Here every
step is a ``precisionaudit`` process, as a user runs it, on:

- **ONNX exports** of real models (``tests/onnx_models.py``'s encoders, ``bench/onnx_zoo.py``'s
  architectures, sample models) by both exporters, with dynamic axes, as real exports have
  them: ``scan``, ``plan``, ``check --plan`` on the export's example inputs, ``convert --plan``;
- **architectures** from their transformers configs (``bench/zoo/hf_zoo.py``): ``scan``, and
  for some ``plan`` and ``check --plan`` in pure fp16;
- **documented incidents** (``bench/incidents/``) with their fixed twins, and the fix-and-prove
  demonstrations (``tests/demos/``): ``scan --data example``, ``plan --data example``,
  ``check`` with and without the plan;
- **training scripts**: the incident reproductions of ``samples/training/incidents/`` and
  training code of the installed libraries (transformers, accelerate, lightning);
- **the watch on real engines**: ``tests/watch_distributed.py`` under ``torchrun`` (gloo), then
  ``precisionaudit watch``.

A case's outcome is what a user sees: each step's exit code, the findings at warning or
above (rule, severity, module, op), the plan's entries, the check's verdicts. It is compared
with ``bench/regress_baseline.json``; every difference is printed, naming the case and what
changed (a new internal error, a model no longer captured, a finding lost or added, a plan
that no longer passes its check), and the run exits 1. An intended change is recorded with
``--update`` in the same commit, its reason in the commit message.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
BASELINE = os.path.join(HERE, "regress_baseline.json")
sys.path[:0] = [ROOT, os.path.join(ROOT, "tests"), HERE]
LOUD = ("error", "warning")
INTERNAL = "internal error, please report"


# --------------------------------------------------------------------------- running a step
def cli(*args, cwd=ROOT, timeout=900) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of one ``precisionaudit`` process."""
    done = subprocess.run([sys.executable, "-m", "precisionaudit", *map(str, args)], capture_output=True,
                          text=True, cwd=cwd, timeout=timeout, env={**os.environ, "PYTHONWARNINGS": "ignore"})
    return done.returncode, done.stdout, done.stderr


def failure(code: int, stderr: str, where: str) -> dict | None:
    """The outcome of a step that did not run to a verdict: an internal error (a traceback or
    the words the CLI uses for one) or another exit 2 (its one line, paths made relative)."""
    if INTERNAL in stderr or "Traceback (most recent call last)" in stderr:
        line = next((ln for ln in stderr.splitlines() if INTERNAL in ln), stderr.strip().splitlines()[-1])
        return {"exit": code, "internal_error": portable(line, where)}
    if code not in (0, 1):
        errors = [ln for ln in stderr.splitlines() if ln.startswith("precisionaudit: error:")]
        return {"exit": code, "error": portable((errors or stderr.strip().splitlines() or ["?"])[-1], where)}
    return None


def portable(text: str, where: str) -> str:
    """``text`` without the run's temporary folders or this checkout's path."""
    return text.replace(where, "<tmp>").replace(ROOT + os.sep, "")[:300]


def findings_of(report: dict) -> list[str]:
    """The warning-or-above findings of a JSON scan report, one sorted line each."""
    return sorted(f"{f['rule']} {f['severity']} {f.get('module') or '<root>'}:{f.get('op') or '-'}"
                  for f in report["findings"] if f["severity"] in LOUD)


def scan(path, flags, where) -> dict:
    code, out, err = cli("scan", path, *flags, "--format", "json")
    failed = failure(code, err, where)
    if failed:
        return failed
    report = json.loads(out)
    models = [m for m in report["models"] if m.get("status") != "ok"]
    if models:
        return {"exit": code, "error": portable(models[0].get("error") or "?", where)}
    return {"exit": code, "findings": findings_of(report)}


def plan(path, flags, out_file, where) -> dict:
    from precisionaudit.plan.file import load_plan

    code, _, err = cli("plan", path, *flags, "-o", out_file)
    failed = failure(code, err, where)
    if failed:
        return failed
    written = load_plan(out_file)
    return {"exit": code, "entries": [entry(o) for o in written.overrides] +
            [f"keep {m}" for m in written.keep_fp32_modules]}


def entry(override) -> str:
    """'attn[div,matmul#4]' (a module's ops; '*': all of it), or an ONNX entry's nodes and op types."""
    if override.is_onnx:
        return " ".join(f"{key} {','.join(values)}" for key, values in
                        (("nodes", override.nodes), ("op_types", override.op_types)) if values)
    return f"{override.module or '<root>'}[{','.join(override.ops) if override.ops else '*'}]"


def check(path, flags, where, plan_file=None) -> dict:
    code, out, err = cli("check", path, *flags, "--format", "json", *(["--plan", plan_file] if plan_file else []))
    failed = failure(code, err, where)
    if failed:
        return failed
    report = json.loads(out)
    verdicts = {v["name"]: v["status"] for v in report["variants"] if v["name"] != "reference"}
    return {"exit": code, "passed": report["passed"], **verdicts}


# --------------------------------------------------------------------------- the cases
@dataclass
class Case:
    """One input of the corpus: ``id`` names it in the baseline, ``run(where)`` returns its
    outcome (a dict of steps), ``where`` a temporary folder of its own."""
    id: str
    run: object
    subset: bool = False


@dataclass
class Corpus:
    cases: list = field(default_factory=list)

    def add(self, case_id, run, subset=False):
        self.cases.append(Case(case_id, run, subset))


def exports_dir() -> str:
    """Where the ONNX exports are kept between runs (keyed by the versions that make them)."""
    import torch
    import transformers

    base = os.environ.get("PRECISIONAUDIT_REGRESS_CACHE") or os.path.join(
        os.path.expanduser("~"), ".cache", "precisionaudit-regress")
    path = os.path.join(base, f"torch-{torch.__version__}-transformers-{transformers.__version__}")
    os.makedirs(path, exist_ok=True)
    return path


#: ONNX exports: (sample, subset?); each by both exporters with dynamic axes
ONNX_MODELS = [("zoo:gpt2", True), ("bert", True), ("check_mask_fill.py", False), ("pa107_mask_hazard.py", False),
               ("check_exp_overflow.py", False), (os.path.join(HERE, "models", "onnx_softplus_gate.py"), False),
               ("distilbert", False), ("zoo:vit", False), ("zoo:t5_encoder", False), ("zoo:resnet", False),
               ("zoo:convnext", False), ("zoo:whisper_encoder", False)]


def onnx_case(sample: str, dynamo: bool):
    def run(where):
        from onnx_models import ENCODERS, export, export_encoder, inputs_file
        from onnx_zoo import PREFIX, export_zoo

        exporter = export_encoder if sample in ENCODERS else export_zoo if sample.startswith(PREFIX) else export
        logging.disable(logging.WARNING)  # the exporters' notes (torchvision ops it skips) are no outcome
        try:
            path = exporter(sample, exports_dir(), dynamo, True)
        finally:
            logging.disable(logging.NOTSET)
        data = inputs_file(path)
        outcome = {"scan": scan(path, [], where)}
        plan_file = os.path.join(where, "plan.yaml")
        outcome["plan"] = plan(path, [], plan_file, where)
        if "entries" in outcome["plan"]:
            outcome["check"] = check(path, ["--data", data], where, plan_file)
            code, _, err = cli("convert", path, "--plan", plan_file, "-o", os.path.join(where, "fp16.onnx"))
            outcome["convert"] = failure(code, err, where) or {"exit": code}
        return outcome
    return run


#: architectures of bench/zoo/hf_zoo.py: (name, subset?, plan and check them in pure fp16?)
ARCHITECTURES = [("gpt2", True, False), ("llama", True, True), ("gemma", False, True), ("gpt_neox", False, True),
                 ("mistral", False, False), ("qwen2", False, False), ("opt", False, False), ("bloom", False, False),
                 ("falcon", False, False), ("phi", False, False), ("mixtral", False, False), ("mamba", False, False),
                 ("t5", True, False), ("bert", False, False), ("deberta_v2", False, False), ("vit", False, False),
                 ("convnext", False, False), ("swin", False, False), ("whisper", False, False),
                 ("clip", False, False)]
ZOO_FILE = os.path.join(HERE, "zoo", "hf_zoo.py")


def architecture_case(name: str, pure_plan: bool):
    def run(where):
        load = ["--entry", f"get_{name}", "--inputs", f"inputs_{name}"]
        outcome = {target: scan(ZOO_FILE, [*load, "--dtype", dtype, "--mode", mode], where)
                   for target, (dtype, mode) in {"scan fp16 autocast": ("float16", "autocast"),
                                                 "scan bf16 autocast": ("bfloat16", "autocast"),
                                                 "scan fp16 pure": ("float16", "pure")}.items()}
        if pure_plan:
            flags = [*load, "--dtype", "float16", "--mode", "pure"]
            plan_file = os.path.join(where, "plan.yaml")
            outcome["plan fp16 pure"] = plan(ZOO_FILE, flags, plan_file, where)
            if "entries" in outcome["plan fp16 pure"]:
                outcome["check fp16 pure"] = check(ZOO_FILE, flags, where, plan_file)
        return outcome
    return run


def incident_case(path: str, flags: list):
    """A documented incident (or demonstration) and, where it has one, its fixed twin."""
    def run(where):
        plan_file = os.path.join(where, "plan.yaml")
        outcome = {"scan": scan(path, [*flags, "--data", "example"], where),
                   "check": check(path, flags, where),
                   "plan": plan(path, [*flags, "--data", "example"], plan_file, where)}
        if "entries" in outcome["plan"]:
            outcome["check --plan"] = check(path, flags, where, plan_file)
        fixed = path[:-3] + "_fixed.py"
        if os.path.exists(fixed):
            outcome["fixed: scan"] = scan(fixed, [*flags, "--data", "example"], where)
            outcome["fixed: check"] = check(fixed, flags, where)
        return outcome
    return run


def incidents() -> list:
    from incident_bench import INCIDENT_SET
    from test_demos import CASES, DEMOS

    found = [(f"incident {i.name}", i.path(), i.flags) for i in INCIDENT_SET]
    found += [(f"demo {name[:-3]} {dtype} {mode}", os.path.join(DEMOS, name), ["--dtype", dtype, "--mode", mode])
              for name, dtype, mode, _ in CASES]
    return found


#: training code of the installed libraries, read as training scripts (none of it is ours)
LIBRARY_TRAINING_CODE = ["transformers/trainer.py", "transformers/training_args.py", "accelerate/accelerator.py",
                         "accelerate/optimizer.py", "accelerate/utils/dataclasses.py",
                         "lightning/pytorch/loops/optimization/automatic.py",
                         "lightning/pytorch/plugins/precision/amp.py", "lightning/pytorch/core/module.py"]


def training_case(where):
    """Findings per file over the training incident corpora (hazards and fixed twins) and the
    libraries' training code, copied out of site-packages (a scan skips a venv, as ruff does)."""
    import importlib.util

    corpora = [os.path.join(ROOT, "samples", "training", d) for d in ("incidents", "frameworks")]
    corpora = [d for d in corpora if os.path.isdir(d)]
    library = os.path.join(where, "library")
    for relative in LIBRARY_TRAINING_CODE:
        package = relative.split("/")[0]
        spec = importlib.util.find_spec(package)
        if spec is None or not spec.submodule_search_locations:
            continue
        source = os.path.join(spec.submodule_search_locations[0], *relative.split("/")[1:])
        os.makedirs(os.path.dirname(os.path.join(library, relative)), exist_ok=True)
        shutil.copy(source, os.path.join(library, relative))
    code, out, err = cli("scan", *corpora, library, "--format", "json", "--fail-on", "error")
    failed = failure(code, err, where)
    if failed:
        return {"scan": failed}
    report = json.loads(out)
    per_file = {}
    for f in report["findings"]:
        name = portable(f["path"], where).replace("<tmp>/library/", "")
        per_file.setdefault(name, []).append(f"{f['rule']} {f['severity']}")
    errors = sorted(portable(m["path"], where) for m in report["models"] if m.get("status") == "error")
    return {"scan": {"exit": code, "files": {k: sorted(v) for k, v in sorted(per_file.items())},
                     "errors": errors}}


#: the watch's real-engine runs of tests/watch_distributed.py (DeepSpeed: real, on its CPU accelerator)
WATCH_RUNS = [("ddp", True), ("fsdp", False), ("deepspeed3", False)]


def watch_case(kind: str):
    def run(where):
        log = os.path.join(where, "log")
        done = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2",
                               os.path.join(ROOT, "tests", "watch_distributed.py"), kind, log],
                              capture_output=True, text=True, cwd=ROOT, timeout=600,
                              env={**os.environ, "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore",
                                   "DS_ACCELERATOR": "cpu"})
        if done.returncode != 0:
            return {"torchrun": {"exit": done.returncode, "error": portable(done.stderr.strip()[-300:], where)}}
        code, out, err = cli("watch", log, "--format", "json")
        failed = failure(code, err, where)
        if failed:
            return {"watch": failed}
        report = json.loads(out)
        found = sorted(f"{f['rule']} {f['severity']} rank {f.get('evidence', {}).get('rank')} "
                       f"{f.get('module') or '<root>'}:{f.get('op') or '-'}" for f in report["findings"])
        return {"watch": {"exit": code, "findings": found}}
    return run


def corpus() -> Corpus:
    c = Corpus()
    for sample, subset in ONNX_MODELS:
        for dynamo in (False, True):
            name = os.path.basename(sample).removesuffix(".py").removeprefix("zoo:")
            c.add(f"onnx {name} {'dynamo' if dynamo else 'legacy'} dynamic", onnx_case(sample, dynamo),
                  subset and dynamo)
    for name, subset, pure_plan in ARCHITECTURES:
        c.add(f"architecture {name}", architecture_case(name, pure_plan), subset)
    for case_id, path, flags in incidents():
        subset = any(k in case_id for k in ("nll_loss2d", "favor", "moe_scaling", "mask_fill float16 autocast"))
        c.add(case_id, incident_case(path, flags), subset)
    c.add("training scripts", training_case, True)
    for kind, subset in WATCH_RUNS:
        c.add(f"watch {kind}", watch_case(kind), subset)
    return c


# --------------------------------------------------------------------------- comparing
def differences(before: dict | None, after: dict) -> list[str]:
    """What changed in one case's outcome, one line each, the kinds the issue names first."""
    if before is None:
        return ["new case (not in the baseline)"]
    lines = []
    for step in sorted(set(before) | set(after)):
        b, a = before.get(step), after.get(step)
        if a == b:
            continue
        if a is None or b is None:
            lines.append(f"{step}: {'no longer run' if a is None else 'now run'}")
            continue
        if "internal_error" in a and "internal_error" not in b:
            lines.append(f"{step}: NEW INTERNAL ERROR: {a['internal_error']}")
            continue
        if "error" in a and "error" not in b:
            lines.append(f"{step}: NO LONGER CAPTURED / RUN: {a['error']}")
            continue
        if b.get("passed") and not a.get("passed", True):
            lines.append(f"{step}: NO LONGER PASSES: {a}")
            continue
        for key in sorted(set(b) | set(a)):
            if a.get(key) == b.get(key):
                continue
            old, new = b.get(key), a.get(key)
            if isinstance(old, list) and isinstance(new, list):
                lost = [x for x in old if x not in new]
                added = [x for x in new if x not in old]
                lines.append(f"{step}: {key}" + (f" lost {lost}" if lost else "") + (f" added {added}" if added else ""))
            elif isinstance(old, dict) and isinstance(new, dict):
                for k in sorted(set(old) | set(new)):
                    if old.get(k) != new.get(k):
                        lines.append(f"{step}: {key} {k}: {old.get(k)} -> {new.get(k)}")
            else:
                lines.append(f"{step}: {key}: {old} -> {new}")
    return lines


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--subset", action="store_true", help="only the cases .ci/run runs")
    parser.add_argument("-k", dest="pattern", help="only the cases whose id contains this")
    parser.add_argument("--update", action="store_true", help="write the outcomes into the baseline")
    parser.add_argument("--list", action="store_true", help="list the case ids and stop")
    args = parser.parse_args(argv)
    cases = [c for c in corpus().cases if (not args.subset or c.subset)
             and (not args.pattern or args.pattern in c.id)]
    if args.list:
        print("\n".join(f"{c.id}{' (subset)' if c.subset else ''}" for c in cases))
        return 0
    baseline = {}
    if os.path.exists(BASELINE):
        with open(BASELINE, encoding="utf-8") as f:
            baseline = json.load(f)
    changed, started = 0, time.perf_counter()
    outcomes = {}
    for case in cases:
        began = time.perf_counter()
        with tempfile.TemporaryDirectory(prefix="regress_") as where:
            try:
                outcomes[case.id] = case.run(os.path.realpath(where))
            except Exception as exc:  # noqa: BLE001 - the corpus's own failure is a finding too
                outcomes[case.id] = {"corpus": {"error": f"{type(exc).__name__}: {str(exc)[:200]}"}}
        lines = differences(baseline.get(case.id), outcomes[case.id])
        changed += bool(lines)
        print(f"{'CHANGED' if lines else 'same   '} {case.id} ({time.perf_counter() - began:.0f} s)", flush=True)
        for line in lines:
            print(f"    {line}", flush=True)
    print(f"\n{len(cases)} cases, {changed} changed, {time.perf_counter() - started:.0f} s")
    if args.update:
        baseline.update(outcomes)
        with open(BASELINE, "w", encoding="utf-8") as f:
            json.dump(dict(sorted(baseline.items())), f, indent=1, sort_keys=True)
            f.write("\n")
        print(f"baseline written: {os.path.relpath(BASELINE, ROOT)} ({len(outcomes)} cases recorded)")
        return 0
    return 1 if changed else 0


if __name__ == "__main__":
    sys.exit(main())
