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

``--script FILE`` times the hook's own command (``precisionaudit scan --skip-non-models
train.py``, from the folder that holds it) on FILE and on a 1-line file, without a settings
file and with a precisionaudit.toml naming the cache, cold and warm, before (``--old``) and
now side by side, at least 7 runs of each row. Bytecode is written (under a scratch
``PYTHONPYCACHEPREFIX``) on a first round that is not counted, as an installed hook has it;
``--no-bytecode`` compiles every import from source each run instead.
"""
from __future__ import annotations

import argparse
import importlib.util
import itertools
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time


def timed(command: list[str], env=None, cwd=None) -> tuple[float, float, subprocess.CompletedProcess]:
    """(wall seconds, CPU seconds, result) of one child process, run from a folder that holds
    no precisionaudit (``python -m`` puts the working directory first on sys.path: PYTHONPATH
    must decide which precisionaudit runs)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env=env,
                          cwd=cwd or tempfile.gettempdir())
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), done


def package_root(package: str) -> str:
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit(f"{package}: not installed as a package")
    return list(spec.submodule_search_locations)[0]


class Row:
    def __init__(self, name: str, command: list[str], env=None, before=None, note="", once=False, cwd=None):
        self.name, self.command, self.env, self.before, self.note = name, command, env, before, note
        self.cwd = cwd
        #: a row of minutes (the old code, TorchFix over a folder) runs in the first round only
        self.once = once
        self.walls, self.cpus, self.out = [], [], None

    def run(self):
        if self.before:
            self.before()
        wall, cpu, done = timed(self.command, self.env, self.cwd)
        if done.returncode not in (0, 1):
            raise SystemExit(f"{self.name}: exit {done.returncode}: {done.stderr.strip()[-400:]}")
        self.walls.append(wall)
        self.cpus.append(cpu)
        self.out = done


def scan_rows(target, cache: str, config: str, old: str | None) -> list[Row]:
    """before (the old checkout), now with a cold cache, now with a warm one."""
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    head = [sys.executable, "-m", "precisionaudit", "scan"]
    flags = ["--select", "PA4", "--format", "json", "--exit-zero"]
    target = [target] if isinstance(target, str) else list(target)
    rows = []
    if old:  # a settings file too (it knows no cache-dir): both pay for reading one
        env = {**os.environ, "PYTHONPATH": old}
        plain = os.path.join(os.path.dirname(config), "old", "precisionaudit.toml")
        os.makedirs(os.path.dirname(plain), exist_ok=True)
        open(plain, "w").close()
        rows.append(Row("before (main)", head + ["--config", plain] + flags + target, env, once=True))
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


#: the hook's own command line (.pre-commit-hooks.yaml), run as pre-commit runs it: from the
#: repository's root, files named relative to it
HOOK = ["-m", "precisionaudit", "scan", "--skip-non-models"]


def hook_table(script: str, old: str | None, repeat: int, work: str, no_bytecode: bool) -> None:
    """The hook's command on one training script and on a 1-line file, before (``old``) and
    now, with no settings file (the cache in the working directory, as by default) and with
    a precisionaudit.toml beside the files naming the cache, cold (removed before each run)
    and warm: every row's runs interleaved, medians of wall and CPU time."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")}
    if no_bytecode:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    else:  # compiled once, outside the source trees
        env["PYTHONPYCACHEPREFIX"] = os.path.join(work, "pycache")
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    versions = ([("before", old)] if old else []) + [("now", here)]
    lines = sum(1 for _ in open(script, encoding="utf-8"))
    files = {f"{os.path.basename(script)} ({lines:,} lines)": open(script, encoding="utf-8").read(),
             "a 1-line file": "x = 1\n"}
    rows = {}  # (file, settings, cache, version) -> Row
    for (file, text), settings, (version, path) in itertools.product(files.items(), ("none", "cache-dir"), versions):
        project = os.path.join(work, "hook", version, settings, str(len(text)))
        os.makedirs(project)
        with open(os.path.join(project, "train.py"), "w", encoding="utf-8") as fh:
            fh.write(text)
        cache = os.path.join(project, ".precisionaudit_cache")
        if settings == "cache-dir":
            cache = os.path.join(project, "cache")
            with open(os.path.join(project, "precisionaudit.toml"), "w") as fh:
                fh.write('cache-dir = "cache"\n')
        command = [sys.executable, *HOOK, "train.py"]
        run_env = {**env, "PYTHONPATH": path}
        for state in ("cold", "warm"):  # cold first in each round: it leaves the cache warm
            clear = (lambda c=cache: shutil.rmtree(c, ignore_errors=True)) if state == "cold" else None
            rows[file, settings, state, version] = Row(version, command, run_env, before=clear, cwd=project)
    if not no_bytecode:
        for row in rows.values():
            row.run()
            row.walls, row.cpus = [], []
    for _ in range(repeat):
        for row in rows.values():
            row.run()
    print(f"\nThe hook's command (precisionaudit {' '.join(HOOK[2:])} FILE), {repeat} runs of each row "
          f"interleaved, {'no bytecode (PYTHONDONTWRITEBYTECODE=1)' if no_bytecode else 'bytecode compiled'}:\n")
    names = [v for v, _ in versions]
    ratio = len(names) == 2
    print("| file | settings file | cache | " + " | ".join(f"{v} wall s | {v} CPU s" for v in names)
          + (" | CPU now / before |" if ratio else " |"))
    print("|---|---|---|" + "---:|---:|" * len(names) + ("---:|" if ratio else ""))
    for file, settings, state in dict.fromkeys(k[:3] for k in rows):
        cpus = [statistics.median(rows[file, settings, state, v].cpus) for v in names]
        cells = [f"{statistics.median(rows[file, settings, state, v].walls):.3f} | {cpu:.3f}"
                 for v, cpu in zip(names, cpus)] + ([f"{cpus[1] / cpus[0]:.2f}"] if ratio else [])
        print(f"| {file} | {'none' if settings == 'none' else 'cache-dir = ...'} | {state} | {' | '.join(cells)} |")
    outputs = {re.sub(r"\([\d.]+ s\)", "", r.out.stdout) for k, r in rows.items() if k[0] == next(iter(files))}
    print(f"\noutputs on the script identical across rows: {'yes' if len(outputs) == 1 else 'NO'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--folder", help="a folder of training code (diffusers' examples/)")
    parser.add_argument("--package", help="an installed package's folder instead (transformers)")
    parser.add_argument("--old", help="a copy of an earlier precisionaudit, run as the 'before' rows")
    parser.add_argument("--script", help="one training script, timed through the pre-commit hook's command")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each row (--script: at least 7)")
    parser.add_argument("--no-bytecode", action="store_true", help="--script: run every row with "
                        "PYTHONDONTWRITEBYTECODE=1, each import compiled from source (default: bytecode "
                        "written on a first round that is not counted, as an installed hook has it)")
    parser.add_argument("--flake8")
    parser.add_argument("--ruff")
    args = parser.parse_args()
    target = args.folder or (package_root(args.package) if args.package else None)
    work = tempfile.mkdtemp(prefix="training-bench-")
    cache = os.path.join(work, "folder", "cache")
    config = os.path.join(work, "folder", "precisionaudit.toml")  # not above hook_table's projects
    os.makedirs(os.path.dirname(config))
    with open(config, "w") as fh:
        fh.write(f'cache-dir = "{cache}"\n')
    print(f"load average {os.getloadavg()[0]:.1f} {os.getloadavg()[1]:.1f} at the start "
          f"({subprocess.run(['uptime'], capture_output=True, text=True).stdout.strip()})")
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
        hook_table(args.script, args.old, max(args.repeat, 7), work, args.no_bytecode)
    print(f"\nload average {os.getloadavg()[0]:.1f} {os.getloadavg()[1]:.1f} at the end "
          f"({subprocess.run(['uptime'], capture_output=True, text=True).stdout.strip()})")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
