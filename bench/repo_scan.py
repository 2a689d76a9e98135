"""Scan real repositories' checkouts as a pre-commit gate does, with this tree's code and with
another tree's (``--baseline-src``, e.g. a ``git archive`` of main), side by side.

``python bench/repo_scan.py CHECKOUT[:SUBDIR] ... [--baseline-src DIR]`` runs, from each
checkout's root, ``precisionaudit scan SUBDIR --skip-non-models --format json -o FILE``
and prints one row per repository and tree: the files in the report, how many of them were
imported as model files, the exit code, the findings and the wall time (with the first error
line when a model failed). The runs of one repository are interleaved so that the machine's
load hits both trees alike; ``uptime`` is printed with them.
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def scan(checkout: str, target: str, src: str | None, timeout: int) -> dict:
    with tempfile.TemporaryDirectory() as scratch:
        out = os.path.join(scratch, "report.json")
        env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1", HF_HUB_OFFLINE="1")
        if src:
            env["PYTHONPATH"] = src
        started = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "precisionaudit", "scan", target, "--skip-non-models",
                               "--format", "json", "-o", out, "--timeout", str(timeout)],
                              cwd=checkout, env=env, capture_output=True, text=True)
        wall = time.perf_counter() - started
        report = json.load(open(out)) if os.path.exists(out) else {"models": [], "findings": []}
    models = report["models"]
    errors = [m for m in models if m["status"] == "error"]
    stderr = done.stderr.strip().splitlines()
    first_error = (errors[0]["error"] if errors else stderr[-1] if stderr else "") if done.returncode == 2 else ""
    return {"files": len(models), "imported": sum(m["frontend"] != "training" for m in models),
            "exit": done.returncode, "findings": len(report["findings"]),
            "rules": collections.Counter(f["rule"] for f in report["findings"]), "errors": len(errors),
            "wall_s": wall, "first_error": first_error[:160]}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("checkouts", nargs="+", help="CHECKOUT or CHECKOUT:SUBDIR")
    parser.add_argument("--baseline-src", help="a source tree of precisionaudit to compare with")
    parser.add_argument("--timeout", type=int, default=120, help="--timeout per model")
    args = parser.parse_args()
    print(os.popen("uptime").read().strip())
    print("| repository | tree | files | imported as models | exit | findings | model errors | wall (s) | first error |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---|")
    for spec in args.checkouts:
        checkout, _, target = spec.partition(":")
        trees = [("baseline", args.baseline_src)] if args.baseline_src else []
        for name, src in [*trees, ("this tree", None)]:
            row = scan(checkout, target or ".", src, args.timeout)
            label = os.path.basename(checkout.rstrip("/")) + (f"/{target}" if target else "")
            print(f"| {label} | {name} | {row['files']} | {row['imported']} | {row['exit']} | {row['findings']} | "
                  f"{row['errors']} | {row['wall_s']:.0f} | {row['first_error']} |", flush=True)
    print(os.popen("uptime").read().strip())


if __name__ == "__main__":
    main()
