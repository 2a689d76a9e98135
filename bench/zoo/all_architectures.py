"""Every causal-LM and image-classification architecture transformers ships, at its real size.

    python bench/zoo/all_architectures.py                      # all of them, fp16 autocast
    python bench/zoo/all_architectures.py --only deepseek_v3 dots1 resnet
    python bench/zoo/all_architectures.py --keep /tmp/archs --json archs.json

What a new user does: a Hugging Face directory holding only the default ``config.json`` of
each class in transformers' ``MODEL_FOR_CAUSAL_LM_MAPPING_NAMES`` and
``MODEL_FOR_IMAGE_CLASSIFICATION_MAPPING_NAMES`` (the model_type's config class with no
arguments, ``architectures`` naming the class), scanned as ``precisionaudit scan DIR --format
json`` does it (fp16 autocast, the default target). Default configs are the families' real
sizes (DeepSeek-V3's is 671 B parameters).

This process imports torch, transformers and precisionaudit once, then runs each scan in a
child forked for it (the command's ``main``, in-process there), so that the 242 scans do not
pay a fresh interpreter's imports each (``--fresh``: one ``python -m precisionaudit`` process
per architecture, as bench/scale_bench.py runs them). Per architecture: captured or not, the
reason class, the findings at or above warning, wall time and peak RSS (the child's
``ru_maxrss`` from ``os.wait4``: it includes the imports the child shares with this process,
about as a fresh process holds them). Each child runs under an address-space limit
(``--memory-gib`` above what it inherits) so that an allocation failure is one failing row,
not a machine out of memory, and is killed after ``--timeout`` seconds. Reason classes:

- ``captured`` (fake tensors), ``captured eagerly``, ``structure only`` (the forward was not
  run: the note says why): the scan reported on the model;
- ``model error``, ``config error``, ``no inputs``, ``missing package``: a refusal whose one line
  names the model's or its config's own error (transformers' default config included), an
  input the scan does not generate, or a package the model imports that is not installed;
- ours: ``internal error``, ``allocation failure``, ``our capture`` (a limitation of the scan's
  capture left as the refusal), ``timeout``, ``unclassified`` (an exit 2 whose line says
  neither whose error it is).

Prints a Markdown table and its totals (the ones quoted in bench/README.md). Exit status 1
when a row is of one of our classes.
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import resource
import signal
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.dirname(HERE)
sys.path.insert(0, BENCH)
from scale_bench import run_once  # one process-measuring helper for the benches

TASKS = {"causal-lm": "MODEL_FOR_CAUSAL_LM_MAPPING_NAMES",
         "image-classification": "MODEL_FOR_IMAGE_CLASSIFICATION_MAPPING_NAMES"}
SCANNED = ("captured", "captured eagerly", "structure only")
REFUSED = ("model error", "config error", "no inputs", "missing package")
OURS = ("internal error", "allocation failure", "our capture", "timeout", "unclassified")
#: the words of a refusal that name whose error it is (the scan's messages)
MODEL_ERROR = ("the model's own error", "fails the same way")
CONFIG_ERROR = ("transformers cannot read the config", "its default config", "the config's own error")
NO_INPUTS = ("is not generated", "no vocab_size")
MISSING_PACKAGE = ("a package the model imports is not installed",)
ALLOCATION = ("can't allocate memory", "out of memory", "MemoryError", "Cannot allocate memory")


def architectures(only=()):
    """(model_type, class name, task) of every class of the two task mappings."""
    from transformers.models.auto import modeling_auto

    found = []
    for task, mapping in TASKS.items():
        for model_type, names in getattr(modeling_auto, mapping).items():
            for name in (names,) if isinstance(names, str) else names:
                if not only or model_type in only or name in only:
                    found.append((model_type, name, task))
    return found


def write_directory(root: str, model_type: str, name: str) -> str | None:
    """A directory with the model_type's default config.json naming ``name``; None when
    transformers cannot make or save its own default config (the error is returned instead)."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    directory = os.path.join(root, f"{model_type}-{name}")  # a class may serve several model_types
    try:
        config = CONFIG_MAPPING[model_type]()
        config.architectures = [name]
        config.save_pretrained(directory)
    except Exception as exc:  # noqa: BLE001 - transformers' own default config fails
        return f"transformers' default {model_type} config: {type(exc).__name__}: {str(exc)[:200]}"
    return directory


def classify(run: dict, timeout: float) -> tuple[str, str]:
    """(reason class, the line that says it) of one scan."""
    report, line = run["report"], (run["stderr"] or [""])[-1]
    if run["rc"] in (0, 1) and report:
        model = report["models"][0]
        notes = "; ".join(model.get("notes") or []) + "; ".join(model.get("skipped") or [])
        kind = {"fake": "captured", "eager": "captured eagerly"}.get(model["frontend"], "structure only")
        return kind, notes
    if run["wall"] >= timeout or "time limit" in line:
        return "timeout", line or f"killed after {run['wall']:.0f} s"
    if run["rc"] in (-9, 137) or any(w in line for w in ALLOCATION):
        return "allocation failure", line or f"killed (exit {run['rc']})"
    if "internal error" in line:
        return "internal error", line
    for kind, words in (("config error", CONFIG_ERROR), ("model error", MODEL_ERROR), ("no inputs", NO_INPUTS),
                        ("missing package", MISSING_PACKAGE)):
        if any(w in line for w in words):
            return kind, line
    if "fake-tensor" in line or "capture" in line:
        return "our capture", line
    return "unclassified", line


def limit_memory(gib: float):
    """Limit the address space to what this process maps now plus ``gib``."""
    with open("/proc/self/statm") as fh:
        mapped = int(fh.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    resource.setrlimit(resource.RLIMIT_AS, (mapped + int(gib * 2 ** 30),) * 2)


def run_forked(argv: list[str], gib: float, timeout: float) -> dict:
    """The command ``precisionaudit ARGV`` in a forked child: wall seconds, peak RSS (MiB),
    exit code, JSON stdout, the last line of stderr; killed at ``timeout`` seconds."""
    from precisionaudit.cli import main as command

    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        sys.stdout.flush()
        sys.stderr.flush()
        start = time.perf_counter()
        pid = os.fork()
        if pid == 0:  # the child: the command, then its exit code
            code = 1
            try:
                os.dup2(out.fileno(), 1)
                os.dup2(err.fileno(), 2)
                limit_memory(gib)
                command.main(argv, prog_name="precisionaudit")
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else 1
            except BaseException:  # noqa: BLE001 - reported as the child's exit code
                import traceback
                traceback.print_exc()
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code)
        while True:
            done, status, usage = os.wait4(pid, os.WNOHANG)
            if done:
                break
            if time.perf_counter() - start > timeout:
                os.kill(pid, signal.SIGKILL)
                _, status, usage = os.wait4(pid, 0)
                break
            time.sleep(0.1)
        wall = time.perf_counter() - start
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(errors="replace"), err.read().decode(errors="replace")
    rc = os.waitstatus_to_exitcode(status)
    try:
        report = json.loads(stdout) if rc in (0, 1) and stdout else None
    except ValueError:
        report = None
    return {"wall": wall, "rss_mib": usage.ru_maxrss / 1024, "rc": rc, "report": report,
            "stderr": stderr.strip().splitlines()[-1:] or [""]}


def scan(directory: str, gib: float, timeout: float, fresh: bool) -> dict:
    argv = ["scan", directory, "--format", "json", "--timeout", str(int(timeout))]
    if fresh:
        run = run_once(["-m", "precisionaudit", *argv], preexec=lambda: limit_memory(gib))
    else:
        run = run_forked(argv, gib, timeout + 30)
    run["class"], run["why"] = classify(run, timeout)
    findings = (run["report"] or {}).get("findings") or []
    run["warnings"] = collections.Counter(f["rule"] for f in findings if f["severity"] in ("error", "warning"))
    return run


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", default=(), help="model_types or class names")
    parser.add_argument("--memory-gib", type=float, default=16.0, help="address-space limit per scan")
    parser.add_argument("--timeout", type=float, default=300.0, help="--timeout of each scan, seconds")
    parser.add_argument("--keep", metavar="DIR", help="write the directories here and keep them")
    parser.add_argument("--json", metavar="FILE", help="write every row to this file")
    parser.add_argument("--fresh", action="store_true", help="a fresh python process per architecture")
    args = parser.parse_args(argv)
    if not args.fresh:
        import torch  # noqa: F401 - imported once, before the children are forked
        import transformers  # noqa: F401
        from torch._subclasses.fake_tensor import FakeTensorMode

        import precisionaudit.cli  # noqa: F401

        FakeTensorMode()  # imports torch._dynamo, as the command's preload does

    root = args.keep or tempfile.mkdtemp(prefix="all-architectures-")
    rows = []
    print("| architecture | model_type | task | class | frontend | warning+ findings | wall s | peak RSS MiB | why |")
    print("|---|---|---|---|---|---|---:|---:|---|", flush=True)
    for model_type, name, task in architectures(args.only):
        made = write_directory(root, model_type, name)
        if not os.path.isdir(made or ""):
            run = {"class": "config error", "why": made, "wall": 0.0, "rss_mib": 0.0, "warnings": {},
                   "report": None}
        else:
            run = scan(made, args.memory_gib, args.timeout, args.fresh)
        frontend = ((run["report"] or {}).get("models") or [{}])[0].get("frontend", "-")
        warnings = ", ".join(f"{rule} {n}" for rule, n in sorted(run["warnings"].items())) or "-"
        run["why"] = (run["why"] or "").removeprefix("precisionaudit: error: ")
        if os.path.isdir(made or ""):
            run["why"] = run["why"].replace(made, os.path.basename(made))
        why = run["why"].replace("|", "/").replace("\n", " ")[:240]
        rows.append({"architecture": name, "model_type": model_type, "task": task, "class": run["class"],
                     "frontend": frontend, "warnings": dict(run["warnings"]), "wall": round(run["wall"], 2),
                     "rss_mib": round(run["rss_mib"]), "why": run["why"]})
        print(f"| {name} | {model_type} | {task} | {run['class']} | {frontend} | {warnings} | "
              f"{run['wall']:.1f} | {run['rss_mib']:.0f} | {why} |", flush=True)
    print_totals(rows)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(rows, fh, indent=1)
    return 1 if any(r["class"] in OURS for r in rows) else 0


def print_totals(rows):
    counts = collections.Counter(r["class"] for r in rows)
    scanned = sum(counts[c] for c in SCANNED)
    print(f"\n{len(rows)} architectures: {scanned} scanned ({100 * scanned / max(len(rows), 1):.0f}%), "
          f"{sum(counts[c] for c in REFUSED)} refused with the model's or config's own error, "
          f"{sum(counts[c] for c in OURS)} ours")
    print("| class | architectures |\n|---|---:|")
    for kind in (*SCANNED, *REFUSED, *OURS):
        print(f"| {kind} | {counts[kind]} |")
    by_task = collections.Counter((r["task"], r["class"] in SCANNED) for r in rows)
    for task in TASKS:
        print(f"{task}: {by_task[task, True]} of {by_task[task, True] + by_task[task, False]} scanned")
    rules = collections.Counter()
    for r in rows:
        rules.update(r["warnings"])
    flagged = sum(1 for r in rows if r["warnings"])
    print(f"warning+ findings: {sum(rules.values())} in {flagged} architectures "
          f"({', '.join(f'{k} {v}' for k, v in sorted(rules.items())) or 'none'})")
    walls = sorted(r["wall"] for r in rows if r["class"] in SCANNED)
    rss = sorted(r["rss_mib"] for r in rows if r["class"] in SCANNED)
    if walls:
        print(f"scanned: wall median {walls[len(walls) // 2]:.1f} s, max {walls[-1]:.1f} s; "
              f"peak RSS median {rss[len(rss) // 2]:.0f} MiB, max {rss[-1]:.0f} MiB")


if __name__ == "__main__":
    sys.exit(main())
