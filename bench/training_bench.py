"""Time the training rules (PA4xx) over a folder of training code, as a user runs them (one
``precisionaudit scan --select PA4`` process), against TorchFix and ruff on the same folder,
side by side in one run: every row's runs interleaved, medians reported, with the load.

Issue 37's targets: diffusers' ``examples/`` in at most 0.2x TorchFix's time with a cold
cache, at most 0.02x with a warm one, and one 2,000-line training script in under 0.3 s end
to end through the pre-commit hook's command (``--script``). Usage:

    python bench/training_bench.py --folder DIFFUSERS/examples [--package transformers]
        [--old OLD_CHECKOUT] [--flake8 PATH] [--ruff PATH] [--script FILE] [--repeat 3]

``--old`` names a copy of an earlier precisionaudit (``git archive main precisionaudit rules |
tar -x -C DIR``), run with ``PYTHONPATH`` as the "before" rows. ``--flake8``/``--ruff`` name
executables of an environment where TorchFix and ruff are installed (``pip install torchfix
ruff`` in a separate venv). Over a folder, TorchFix and the old code run once (minutes
each), in the first round; the other rows ``--repeat`` times, the rounds interleaved.
Wall time and CPU time (user + system of the process) are both shown: on a shared machine the
CPU time is the steadier of the two.
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time


def timed(command: list[str], env=None) -> tuple[float, float, subprocess.CompletedProcess]:
    """(wall seconds, CPU seconds, result) of one child process, run from a folder that holds
    no precisionaudit (``python -m`` puts the working directory first on sys.path: PYTHONPATH
    must decide which precisionaudit runs)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=tempfile.gettempdir())
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), done


def package_root(package: str) -> str:
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit(f"{package}: not installed as a package")
    return list(spec.submodule_search_locations)[0]


class Row:
    def __init__(self, name: str, command: list[str], env=None, before=None, note="", once=False):
        self.name, self.command, self.env, self.before, self.note = name, command, env, before, note
        #: a row of minutes (the old code, TorchFix over a folder) runs in the first round only
        self.once = once
        self.walls, self.cpus, self.out = [], [], None

    def run(self):
        if self.before:
            self.before()
        wall, cpu, done = timed(self.command, self.env)
        if done.returncode not in (0, 1):
            raise SystemExit(f"{self.name}: exit {done.returncode}: {done.stderr.strip()[-400:]}")
        self.walls.append(wall)
        self.cpus.append(cpu)
        self.out = done


def scan_rows(target, cache: str, config: str, old: str | None, hook: bool = False) -> list[Row]:
    """before (the old checkout), now with a cold cache, now with a warm one."""
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    head = [sys.executable, "-m", "precisionaudit", "scan"]
    flags = ["--skip-non-models"] if hook else ["--select", "PA4", "--format", "json", "--exit-zero"]
    target = [target] if isinstance(target, str) else list(target)
    rows = []
    if old:  # a settings file too (it knows no cache-dir): both pay for reading one
        env = {**os.environ, "PYTHONPATH": old}
        plain = os.path.join(os.path.dirname(config), "old", "precisionaudit.toml")
        os.makedirs(os.path.dirname(plain), exist_ok=True)
        open(plain, "w").close()
        rows.append(Row("before (main)", head + ["--config", plain] + flags + target, env, once=not hook))
    env = {**os.environ, "PYTHONPATH": here}
    rows.append(Row("now, cold cache", head + ["--config", config] + flags + target, env,
                    before=lambda: shutil.rmtree(cache, ignore_errors=True)))
    rows.append(Row("now, warm cache", head + ["--config", config] + flags + target, env))
    return rows


def findings(row: Row) -> str:
    import json

    if row.out is None or not row.out.stdout.strip().startswith("{"):
        return ""
    document = json.loads(row.out.stdout)
    return f"{len(document['findings'])} findings in {len(document['models'])} files"


def table(title: str, rows: list[Row], base: Row):
    print(f"\n{title}\n\n| tool | median wall s | median CPU s | runs | CPU ratio to {base.name} | notes |")
    print("|---|---:|---:|---:|---:|---|")
    for row in rows:
        if not row.walls:
            continue
        wall, cpu = statistics.median(row.walls), statistics.median(row.cpus)
        ratio = cpu / statistics.median(base.cpus) if base.cpus else float("nan")
        note = row.note or findings(row)
        print(f"| {row.name} | {wall:.2f} | {cpu:.2f} | {len(row.walls)} | {ratio:.3f}x | {note} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--folder", help="a folder of training code (diffusers' examples/)")
    parser.add_argument("--package", help="an installed package's folder instead (transformers)")
    parser.add_argument("--old", help="a copy of an earlier precisionaudit, run as the 'before' rows")
    parser.add_argument("--script", help="one training script, timed through the pre-commit hook's command")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--flake8")
    parser.add_argument("--ruff")
    args = parser.parse_args()
    target = args.folder or (package_root(args.package) if args.package else None)
    work = tempfile.mkdtemp(prefix="training-bench-")
    cache = os.path.join(work, "cache")
    config = os.path.join(work, "precisionaudit.toml")
    with open(config, "w") as fh:
        fh.write(f'cache-dir = "{cache}"\n')
    print(f"load average {os.getloadavg()[0]:.1f} {os.getloadavg()[1]:.1f} at the start")
    if target:
        every = sorted(os.path.join(d, f) for d, _, fs in os.walk(target) for f in fs if f.endswith(".py"))
        # a file that defines get_model() is a model file to a scan, which imports it (it needs
        # its own dependencies: TensorRT's): left out of every row, so all read the same files
        files = [f for f in every if "def get_model(" not in open(f, encoding="utf-8", errors="replace").read()]
        lines = sum(1 for f in files for _ in open(f, encoding="utf-8", errors="replace"))
        print(f"{target}: {len(files)} .py files, {lines:,} lines ({len(every) - len(files)} model files left out: "
              f"{', '.join(os.path.relpath(f, target) for f in every if f not in files)})")
        rows = scan_rows(files, cache, config, args.old)
        if args.ruff:
            ruff = [args.ruff, "check", "--no-cache", "--isolated", "--exit-zero", "--quiet", *files]
            rows.append(Row("ruff check (default rules)", ruff, note="the floor"))
        if args.flake8:
            rows.append(Row("TorchFix (flake8 --select TOR -j 1)",
                            [args.flake8, "--isolated", "--select", "TOR", "-j", "1", "--exit-zero", *files], once=True))
        for round_ in range(args.repeat):
            for row in rows:
                if round_ == 0 or not row.once:
                    row.run()
        if args.flake8:
            rows[-1].note = f"{len(rows[-1].out.stdout.splitlines())} findings"
        table(f"{target} (PA4xx through the CLI, one process each)", rows, rows[-1] if args.flake8 else rows[0])
    if args.script:
        lines = sum(1 for _ in open(args.script, encoding="utf-8"))
        rows = scan_rows(args.script, cache, config, args.old, hook=True)
        for _ in range(max(args.repeat, 5)):
            for row in rows:
                row.run()
        trivial = os.path.join(work, "empty.py")
        with open(trivial, "w") as fh:
            fh.write("x = 1\n")
        floor = scan_rows(trivial, cache, config, None, hook=True)[0]
        floor.name = "now, a 1-line file (the CLI's own cost)"
        for _ in range(max(args.repeat, 5)):
            floor.run()
        table(f"{args.script} ({lines:,} lines) through the hook's command (precisionaudit scan --skip-non-models)",
              rows + [floor], rows[0])
    print(f"\nload average {os.getloadavg()[0]:.1f} {os.getloadavg()[1]:.1f} at the end")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
