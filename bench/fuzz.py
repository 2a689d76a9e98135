"""The fuzz suite of issue 11, at any size: verdicts per family of cases and the defects.

    python bench/fuzz.py [--cli 100] [--documents 40] [--models 60] [--mutants 200] [--seed N] [--limit-s 60]

Families (tests/fuzz_cases.py, tests/onnx_mutants.py): ``cli`` generated command lines,
``documents`` generated settings/plans/baselines, ``models`` generated Python model files
with misbehaving model code, ``onnx`` seeded ONNX mutants (each through scan and one other
command, as tests/test_onnx_fuzz.py). Without --seed the hypothesis examples are the
derandomized ones tests/test_fuzz.py runs; with it, others. Every case runs under a time
limit; the table counts ok (exit 0/1), error (exit 2, one line) and each kind of defect
(tests/fuzzing.py), and the defects are listed below it. Exit 1 when there is any.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests"))

from fuzz_cases import BUDGET, CLI, DOCUMENTS, MODELS, run_cli, run_document, run_model  # noqa: E402
from fuzzing import TALLY  # noqa: E402
from onnx_mutants import MUTANTS  # noqa: E402
from hypothesis import HealthCheck, given, seed, settings  # noqa: E402


def hypothesis_family(family, strategy, run, examples, limit_s, chosen_seed):
    @settings(max_examples=examples, deadline=None, database=None, derandomize=chosen_seed is None,
              suppress_health_check=list(HealthCheck))
    @given(strategy)
    def one(case):
        verdict, detail, what = run(case, limit_s)
        TALLY.add(family, verdict, what, detail)

    if chosen_seed is not None:
        one = seed(chosen_seed)(one)
    one()


def onnx_family(mutants, limit_s):
    from onnx_mutants import COMMANDS, run_mutant, seed_models

    scratch = tempfile.mkdtemp(prefix="onnx-fuzz-")
    import pathlib

    seeds = seed_models(pathlib.Path(scratch))
    others = [c for c in sorted(COMMANDS) if c != "scan"]
    for number in range(mutants):
        for command, verdict, detail, what, _ in run_mutant(number, seeds, ("scan", others[number % len(others)]),
                                                            scratch, limit_s):
            TALLY.add("onnx", verdict, f"mutant {number} ({what}) {command}", detail)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for family, examples in BUDGET.items():
        parser.add_argument(f"--{family}", type=int, default=examples)
    parser.add_argument("--mutants", type=int, default=MUTANTS)
    parser.add_argument("--seed", type=int, default=None, help="hypothesis seed (default: derandomized)")
    parser.add_argument("--limit-s", type=float, default=60.0, help="time limit of one case")
    args = parser.parse_args()
    walls = {}
    for family, strategy, run, examples in (("cli", CLI, run_cli, args.cli),
                                            ("documents", DOCUMENTS, run_document, args.documents),
                                            ("models", MODELS, run_model, args.models)):
        if examples:
            started = time.perf_counter(), time.process_time()
            hypothesis_family(family, strategy, run, examples, args.limit_s, args.seed)
            walls[family] = time.perf_counter() - started[0], time.process_time() - started[1]
    if args.mutants:
        started = time.perf_counter(), time.process_time()
        onnx_family(args.mutants, args.limit_s)
        walls["onnx"] = time.perf_counter() - started[0], time.process_time() - started[1]
    print(TALLY.table())
    print("\nseconds (wall / CPU of this process): "
          + ", ".join(f"{family} {wall:.1f} / {cpu:.1f}" for family, (wall, cpu) in walls.items()))
    print(TALLY.summary())
    print(f"\ndefects: {len(TALLY.defects)}")
    print("\n".join(TALLY.defects))
    return 1 if TALLY.defects else 0


if __name__ == "__main__":
    sys.exit(main())
