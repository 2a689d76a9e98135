"""How long the CLI's quick commands take, against Python's own start-up.

Each command runs --repeat times as its own process; the table gives the median wall time
and the median CPU time (user + system of the child), which a loaded machine inflates less
than the wall time. Run it from the repository's venv, in the checkout to measure (the
commands are ``python -m precisionaudit``, which imports the package of the working directory):

    python bench/cli_bench.py --repeat 15            # `rules` (target: under 0.5 s)
    python bench/cli_bench.py --group onnx           # scan / check of a small .onnx (no torch)
    python bench/cli_bench.py --group scan           # scan of a tiny sample model file

The ``onnx`` group's model is the tests' masked-attention graph (tests/onnx_graphs.py),
written to a temporary directory; its check fails (the -1e9 fill), which is not timed apart.
"""
from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGET_S = 0.5
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def timed(argv: list[str]) -> tuple[float, float]:
    """(wall, cpu) seconds of one run of argv, its output discarded."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if done.returncode not in (0, 1):  # 1: findings / a failed check, which is what they say
        raise SystemExit(f"{' '.join(argv)} exited {done.returncode}: {done.stderr.strip()}")
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--group", choices=["rules", "onnx", "scan"], default="rules")
    args = parser.parse_args()
    tool = [sys.executable, "-m", "precisionaudit"]  # the checkout in the working directory, installed or not
    with tempfile.TemporaryDirectory() as tmp:
        commands = {"python -c pass (floor)": [sys.executable, "-c", "pass"],
                    **GROUPS[args.group](tool, Path(tmp))}
        table(commands, args.repeat, TARGET_S if args.group == "rules" else None)


def rules_commands(tool: list, _tmp: Path) -> dict:
    return {"precisionaudit rules": [*tool, "rules"],
            "precisionaudit rules --format json": [*tool, "rules", "--format", "json"],
            "precisionaudit rules PA1": [*tool, "rules", "PA1"],
            "precisionaudit rules PA106": [*tool, "rules", "PA106"]}


def onnx_commands(tool: list, tmp: Path) -> dict:
    sys.path.insert(0, os.path.join(ROOT, "tests"))
    from onnx_graphs import masked_attention

    model = masked_attention(tmp, "sample.onnx")
    return {"precisionaudit scan sample.onnx": [*tool, "scan", "--isolated", model],
            "precisionaudit check sample.onnx": [*tool, "check", "--isolated", model]}


def scan_commands(tool: list, _tmp: Path) -> dict:
    sample = os.path.join(ROOT, "sample_models", "check_clean.py")
    return {"precisionaudit scan sample_models/check_clean.py": [*tool, "scan", "--isolated", sample]}


GROUPS = {"rules": rules_commands, "onnx": onnx_commands, "scan": scan_commands}


def table(commands: dict, repeat: int, target: float | None) -> None:
    """The Markdown table of median wall and CPU seconds (and, with a target, whether under it)."""
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs; "
          f"medians of {repeat} runs")
    print("| command | wall (s) | cpu (s) |" + (f" under {target} s |" if target else ""))
    print("|---|---:|---:|" + ("---|" if target else ""))
    for name, argv in commands.items():
        runs = [timed(argv) for _ in range(repeat)]
        wall = statistics.median(r[0] for r in runs)
        cpu = statistics.median(r[1] for r in runs)
        verdict = f" {'yes' if wall < target else 'NO'} |" if target else ""
        print(f"| `{name}` | {wall:.3f} | {cpu:.3f} |{verdict}")


if __name__ == "__main__":
    main()
