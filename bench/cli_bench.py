"""How long `precisionaudit rules` takes, against Python's own start-up (target: under 0.5 s).

Each command runs --repeat times as its own process; the table gives the median wall time
and the median CPU time (user + system of the child), which a loaded machine inflates less
than the wall time. Run it from the repository's venv:

    python bench/cli_bench.py --repeat 15
"""
from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time

TARGET_S = 0.5


def timed(argv: list[str]) -> tuple[float, float]:
    """(wall, cpu) seconds of one run of argv, its output discarded."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()
    tool = shutil.which("precisionaudit", path=os.path.dirname(sys.executable)) or "precisionaudit"
    commands = {"python -c pass (floor)": [sys.executable, "-c", "pass"],
                "precisionaudit rules": [tool, "rules"],
                "precisionaudit rules --format json": [tool, "rules", "--format", "json"],
                "precisionaudit rules PA1": [tool, "rules", "PA1"],
                "precisionaudit rules PA106": [tool, "rules", "PA106"]}
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs; "
          f"medians of {args.repeat} runs")
    print(f"| command | wall (s) | cpu (s) | under {TARGET_S} s |")
    print("|---|---:|---:|---|")
    for name, argv in commands.items():
        runs = [timed(argv) for _ in range(args.repeat)]
        wall = statistics.median(r[0] for r in runs)
        cpu = statistics.median(r[1] for r in runs)
        print(f"| `{name}` | {wall:.3f} | {cpu:.3f} | {'yes' if wall < TARGET_S else 'NO'} |")


if __name__ == "__main__":
    main()
