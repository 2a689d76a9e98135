"""Zoo benchmark: findings at warning or above per rule on tiny real architectures.

    python bench/zoo_bench.py                     # every zoo model, three targets
    python bench/zoo_bench.py --models gpt2 bert --targets float16:pure

Scans each model of ``bench/zoo/hf_zoo.py`` (built from transformers configs) in one process
per target set and prints a Markdown table: model, target, frontend, ops, findings at warning
or above by rule (distinct sites in parentheses when they differ), wall and peak RSS. Run it
on two checkouts to compare (``PYTHONPATH=OTHER python bench/zoo_bench.py``).
"""
from __future__ import annotations

import argparse
import collections
import os
import resource
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ZOO = os.path.join(HERE, "zoo", "hf_zoo.py")
TARGETS = ("float16:autocast", "bfloat16:autocast", "float16:pure")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="*")
    parser.add_argument("--targets", nargs="*", default=list(TARGETS))
    args = parser.parse_args(argv)
    sys.path.insert(0, os.path.dirname(ZOO))
    import hf_zoo

    from precisionaudit.core.numerics import Target
    from precisionaudit.rules.engine import load_rules
    from precisionaudit.scanner import scan

    rules = load_rules()
    models = args.models or list(hf_zoo.ZOO)
    print("| model | target | frontend | ops | warning+ by rule: findings (distinct sites) | total | wall s | peak RSS MiB |")
    print("|---|---|---|---:|---|---:|---:|---:|")
    totals = collections.Counter()
    for target_text in args.targets:
        dtype, mode = target_text.split(":")
        for name in models:
            start = time.perf_counter()
            results, findings = scan([ZOO], Target(dtype, mode, "cuda"), rules,
                                     entry=f"get_{name}", inputs=f"inputs_{name}")
            wall = time.perf_counter() - start
            rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
            result = results[0]
            loud = [f for f in findings if f.severity in ("error", "warning")]
            by_rule = collections.Counter(f.rule for f in loud)
            sites = collections.defaultdict(set)
            for f in loud:
                sites[f.rule].add((f.evidence.get("source") or f.line, f.op, f.message))
            cells = ", ".join(f"{r} {n}" + (f" ({len(sites[r])})" if len(sites[r]) != n else "")
                              for r, n in sorted(by_rule.items())) or "-"
            if result.status != "ok":
                cells = f"ERROR: {result.error[:80]}"
            totals[target_text] += len(loud)
            print(f"| {name} | {dtype} {mode} | {result.frontend} | {result.nodes} | {cells} | "
                  f"{len(loud)} | {wall:.2f} | {rss:.0f} |", flush=True)
    print()
    for target_text, n in totals.items():
        print(f"total warning+ findings, {target_text}: {n}")


if __name__ == "__main__":
    main()
