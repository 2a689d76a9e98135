"""Seeded ONNX mutation fuzz over every command (issue 11): verdicts per command.

    python bench/onnx_fuzz.py [--mutants 300] [--first 0] [--limit-s 60]

Mutant N is ``tests/onnx_mutants.mutant(seed graph N % 3, N)``: the same number gives the
same file. Each mutant goes through scan, explain, plan, convert and check in-process.
``ok``: exit 0/1; ``error``: exit 2 with one ``precisionaudit: error:`` line. Any other
column is a defect (traceback, internal error, hang, changed input, staging file left),
listed below the table with the mutant's number. tests/test_onnx_fuzz.py runs 200 of
them (each through scan and one other command) in the default test run.
"""
from __future__ import annotations

import argparse
import collections
import os
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests"))

from onnx_mutants import COMMANDS, run_mutant, seed_models  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mutants", type=int, default=300)
    parser.add_argument("--first", type=int, default=0)
    parser.add_argument("--limit-s", type=float, default=60.0)
    parser.add_argument("--commands", default=",".join(COMMANDS), help="comma-separated")
    parser.add_argument("--verbose", action="store_true", help="each mutant and command on stderr")
    args = parser.parse_args()
    import pathlib

    scratch = pathlib.Path(tempfile.mkdtemp(prefix="onnx-fuzz-"))
    seeds = seed_models(scratch)
    counts, defects, walls = collections.Counter(), [], collections.defaultdict(list)
    for number in range(args.first, args.first + args.mutants):
        for command, verdict, detail, what, wall in run_mutant(number, seeds, args.commands.split(","), scratch,
                                                               args.limit_s):
            if args.verbose:
                print(f"mutant {number} ({what}) {command}: {verdict}", file=sys.stderr, flush=True)
            walls[command].append(wall)
            counts[command, verdict] += 1
            if verdict not in ("ok", "error"):
                defects.append(f"mutant {number} ({what}) {command}: {verdict}: {detail[:300]}")
    verdicts = sorted({v for _, v in counts})
    print(f"{args.mutants} mutants (numbers {args.first}..{args.first + args.mutants - 1})\n")
    print(f"{'command':<9}" + "".join(f"{v:>11}" for v in verdicts) + f"{'median s':>10}")
    for command in args.commands.split(","):
        median = sorted(walls[command])[len(walls[command]) // 2]
        print(f"{command:<9}" + "".join(f"{counts[command, v]:>11}" for v in verdicts) + f"{median:>10.3f}")
    print(f"\ndefects: {len(defects)}")
    print("\n".join(defects))
    return 1 if defects else 0


if __name__ == "__main__":
    sys.exit(main())
