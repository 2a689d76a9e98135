"""Time the static training-step rules (PA4xx) over every ``.py`` of an installed package
against TorchFix and ruff on the same files, each in one process, side by side in one run.

Issue 23's target: the training rules take at most a tenth of TorchFix's time
(``flake8 --select TOR -j 1``); ``ruff check`` is the floor. Most files never mention a
scaler, an optimizer or autocast, so the rules read each file's text first and parse only
those that may hold a training step. Usage:

    python bench/training_bench.py [--package transformers] [--repeat 3]
        [--flake8 PATH] [--ruff PATH] [--skip-torchfix]

``--flake8``/``--ruff`` name the executables of an environment where TorchFix and ruff are
installed (``pip install torchfix ruff`` in a separate venv); without them those rows are
left out. TorchFix runs once (minutes); precisionaudit and ruff ``--repeat`` times (median).
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import subprocess
import sys
import tempfile
import time


def package_files(package: str) -> list[str]:
    """Every .py file of ``package`` as installed, without importing it."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit(f"{package}: not installed as a package")
    root = list(spec.submodule_search_locations)[0]
    return sorted(os.path.join(d, f) for d, _, names in os.walk(root) for f in names if f.endswith(".py"))


def timed(command: list[str], env=None) -> tuple[float, subprocess.CompletedProcess]:
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env=env)
    return time.perf_counter() - started, done


def ours(list_file: str) -> list[str]:
    """The PA4xx rules over the listed files, in one process, as the scan runs them."""
    code = ("import sys; from precisionaudit.training.audit import audit_files; "
            "from precisionaudit.rules.engine import load_rules; "
            "paths = open(sys.argv[1]).read().split(); "
            "found, errors = audit_files(paths, load_rules(checks=False)); "
            "print(len(found), len(errors), 'torch' in sys.modules)")
    return [sys.executable, "-c", code, list_file]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--package", default="transformers")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--flake8")
    parser.add_argument("--ruff")
    parser.add_argument("--skip-torchfix", action="store_true")
    args = parser.parse_args()

    files = package_files(args.package)
    lines = sum(1 for f in files for _ in open(f, encoding="utf-8", errors="replace"))
    print(f"{args.package}: {len(files)} files, {lines:,} lines; one process each; "
          f"load average {os.getloadavg()[0]:.1f}")
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as fh:
        fh.write("\n".join(files))
        list_file = fh.name
    rows = []
    times = []
    for _ in range(args.repeat):
        seconds, done = timed(ours(list_file))
        if done.returncode:
            raise SystemExit(done.stderr.strip().splitlines()[-1])
        times.append(seconds)
    found, errors, torch_imported = done.stdout.split()
    rows.append(("precisionaudit PA4xx", statistics.median(times), len(times),
                 f"{found} findings, {errors} unreadable, torch imported: {torch_imported}"))
    if args.ruff:
        times = [timed([args.ruff, "check", "--no-cache", "--isolated", "--exit-zero", "--quiet", *files])[0]
                 for _ in range(args.repeat)]
        rows.append(("ruff check (default rules)", statistics.median(times), len(times), "the floor"))
    if args.flake8 and not args.skip_torchfix:
        seconds, done = timed([args.flake8, "--isolated", "--select", "TOR", "-j", "1", "--exit-zero", *files])
        rows.append(("TorchFix (flake8 --select TOR -j 1)", seconds, 1,
                     f"{len(done.stdout.splitlines())} findings"))
    os.unlink(list_file)
    base = rows[0][1]
    print(f"\n| tool | median s | runs | ratio to PA4xx | notes |\n|---|---:|---:|---:|---|")
    for name, seconds, runs, note in rows:
        print(f"| {name} | {seconds:.2f} | {runs} | {seconds / base:.2f}x | {note} |")


if __name__ == "__main__":
    main()
