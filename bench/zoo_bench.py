"""Zoo benchmark: findings at warning or above per rule on tiny real architectures.

    python bench/zoo_bench.py                     # every zoo model, three targets
    python bench/zoo_bench.py --models gpt2 bert --targets float16:pure
    python bench/zoo_bench.py --verdicts bench/zoo/verdicts.md   # + false-positive share

A distinct site is (rule, source line): the library line the finding points at. With
``--verdicts`` each distinct warning+ site is looked up in the hand-judged table of that
file (rows ``| rule | source | verdict | ... |``, verdict ``true`` or ``false``; the source
matches by suffix) and the false-positive share of distinct sites is printed per target,
with the sites no row judges.

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
VERDICTS = os.path.join(HERE, "zoo", "verdicts.md")
sys.path.append(os.path.dirname(HERE))  # this checkout's package, unless PYTHONPATH names another
TARGETS = ("float16:autocast", "bfloat16:autocast", "float16:pure")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="*")
    parser.add_argument("--targets", nargs="*", default=list(TARGETS))
    parser.add_argument("--verdicts", help="hand-judged sites (Markdown table) for the FP share")
    args = parser.parse_args(argv)
    from precisionaudit.rules.engine import load_rules

    rules = load_rules()
    models = args.models or list(zoo().ZOO)
    print("| model | target | frontend | ops | warning+ by rule: findings (distinct sites) | total | wall s | peak RSS MiB |")
    print("|---|---|---|---:|---|---:|---:|---:|")
    totals = collections.Counter()
    frontends = collections.Counter()
    target_sites = collections.defaultdict(dict)  # target → (rule, source) → a message
    for target_text in args.targets:
        dtype, mode = target_text.split(":")
        for name in models:
            start = time.perf_counter()
            result, findings = scan_model(name, target_text, rules)
            wall = time.perf_counter() - start
            rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
            loud = loud_findings(findings)
            by_rule = collections.Counter(f.rule for f in loud)
            sites = collections.defaultdict(set)
            for f in loud:
                sites[f.rule].add((f.evidence.get("source") or f.line, f.op, f.message))
                target_sites[target_text].setdefault((f.rule, site_of(f)), f"{name}: {f.message}")
            frontends[result.frontend] += 1
            cells = ", ".join(f"{r} {n}" + (f" ({len(sites[r])})" if len(sites[r]) != n else "")
                              for r, n in sorted(by_rule.items())) or "-"
            if result.status != "ok":
                cells = f"ERROR: {result.error[:80]}"
            totals[target_text] += len(loud)
            print(f"| {name} | {dtype} {mode} | {result.frontend} | {result.nodes} | {cells} | "
                  f"{len(loud)} | {wall:.2f} | {rss:.0f} |", flush=True)
    print()
    runs = sum(frontends.values())
    print("captures: " + ", ".join(f"{k} {n}/{runs}" for k, n in frontends.most_common()))
    for target_text, n in totals.items():
        print(f"total warning+ findings, {target_text}: {n} "
              f"({len(target_sites[target_text])} distinct sites)")
    if args.verdicts:
        report_verdicts(read_verdicts(args.verdicts), target_sites)


def zoo():
    """The ``hf_zoo`` module (bench/zoo/hf_zoo.py): ``ZOO`` maps a model name to its builders."""
    if os.path.dirname(ZOO) not in sys.path:
        sys.path.insert(0, os.path.dirname(ZOO))
    import hf_zoo

    return hf_zoo


def scan_model(name: str, target_text: str, rules):
    """(scan result, findings) of zoo model ``name`` under ``target_text`` ("float16:pure")."""
    from precisionaudit.core.numerics import Target
    from precisionaudit.scanner import scan

    dtype, mode = target_text.split(":")
    results, findings = scan([ZOO], Target(dtype, mode, "cuda"), rules,
                             entry=f"get_{name}", inputs=f"inputs_{name}")
    return results[0], findings


def loud_findings(findings) -> list:
    """The findings at warning or above: the ones the false-positive share is about."""
    return [f for f in findings if f.severity in ("error", "warning")]


def site_of(finding) -> str:
    """The source line a finding points at, from site-packages on (library code) or the file."""
    source = finding.evidence.get("source") or f"{finding.path}:{finding.line}"
    marker = "site-packages" + os.sep
    return source.split(marker, 1)[1] if marker in source else source


def read_verdicts(path) -> dict:
    """(rule, source) → "true"/"false" from the Markdown table rows of ``path``."""
    verdicts = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            cells = [c.strip().strip("`") for c in line.strip().strip("|").split("|")]
            if len(cells) >= 3 and cells[0].startswith("PA") and cells[2] in ("true", "false"):
                verdicts[(cells[0], cells[1])] = cells[2]
    return verdicts


def verdict_of(verdicts: dict, rule: str, source: str) -> str | None:
    """The hand verdict ("true"/"false") of a site, its source matched by suffix; None: unjudged."""
    return next((v for (r, s), v in verdicts.items() if r == rule and source.endswith(s)), None)


def report_verdicts(verdicts, target_sites):
    for target_text, sites in target_sites.items():
        judged = {}
        for (rule, source), example in sites.items():
            verdict = verdict_of(verdicts, rule, source)
            judged[(rule, source)] = verdict
            if verdict is None:
                print(f"  unjudged, {target_text}: {rule} {source} ({example})")
        false = sum(v == "false" for v in judged.values())
        share = false / len(judged) if judged else 0.0
        print(f"false positives, {target_text}: {false} of {len(judged)} distinct sites "
              f"({share:.0%}); unjudged {sum(v is None for v in judged.values())}")


if __name__ == "__main__":
    main()
