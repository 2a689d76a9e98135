"""FP8 eligibility of real-width architectures under ``--dtype float8`` (issue 26).

    python bench/fp8_bench.py                    # every model of bench/zoo/fp8_zoo.py
    python bench/fp8_bench.py --models gpt2 --recipe mxfp8

For each model: the share of its Linear-GEMM FLOPs (2*M*K*N per GEMM with a weight, the
two built layers scaled to the published depth) that runs in FP8 under the target; the
share torchao's documented ``module_filter_fn`` converts (dims multiples of 16, not the last
module: here the output head); the share left after ``plan --dtype float8`` keeps its
modules out (PA601-PA603 at warning, and with PA603's info findings too); and the fallbacks
with their reasons. Numbers only: no GPU, no timing.
"""
import argparse
import collections
import os
import re
import sys

from precisionaudit.core.target import Target
from precisionaudit.rules.engine import load_rules
from precisionaudit.scanner import scan

HERE = os.path.dirname(os.path.abspath(__file__))
ZOO = os.path.join(HERE, "zoo", "fp8_zoo.py")
sys.path.insert(0, os.path.join(HERE, "zoo"))
from fp8_zoo import DEPTH, MODELS  # noqa: E402

LAYER = re.compile(r"\.(?:h|layers|layer)\.(\d+)\.")


def _weight(module: str, depth: int) -> float:
    """How many times the module's GEMM runs at the published depth (2 layers were built)."""
    return depth / 2 if LAYER.search(f".{module}.") else 1.0


def measure(name: str, recipe: str) -> dict:
    rules = [r for r in load_rules() if r.id.startswith("PA6")]
    results, found = scan([ZOO], Target.named("float8", recipe=recipe), rules, entry=f"get_{name}",
                          inputs=f"inputs_{name}")
    result = results[0]
    if result.status != "ok":
        return {"model": name, "error": result.error}
    flagged = collections.defaultdict(set)
    for f in found:
        flagged[f.severity].add(f.module)
    total = fp8 = torchao = plan = plan_info = 0.0
    fallbacks = collections.Counter()
    for _, a in result.graph.nodes(data=True):
        facts = a.get("fp8")
        if facts is None:
            continue
        flops = facts.flops * _weight(a["module"], DEPTH[name])
        total += flops
        if not facts.runs_fp8:
            fallbacks[re.sub(r"K=\d+, N=\d+", "K/N", re.sub(r"a \w+ weight", "a module weight", facts.fallback))] \
                += flops
            continue
        fp8 += flops
        torchao += 0 if facts.output_head else flops
        warned = a["module"] in flagged["warning"] or a["module"] in flagged["error"]
        plan += 0 if warned else flops
        plan_info += 0 if warned or a["module"] in flagged["info"] else flops
    share = (lambda x: round(100 * x / total, 1)) if total else (lambda x: 0.0)
    return {"model": name, "target": share(fp8), "torchao_filter": share(torchao), "plan": share(plan),
            "plan_with_info": share(plan_info),
            "fallbacks": {k: share(v) for k, v in fallbacks.most_common()},
            "findings": collections.Counter(f.rule for f in found)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="*", default=list(MODELS))
    parser.add_argument("--recipe", default="tensorwise")
    args = parser.parse_args()
    print(f"recipe {args.recipe}; % of Linear-GEMM FLOPs in FP8")
    print("| model | target | torchao filter | plan (warning) | plan (+ info) | fallbacks (% FLOPs) | findings |")
    print("|---|---:|---:|---:|---:|---|---|")
    for name in args.models:
        r = measure(name, args.recipe)
        if "error" in r:
            print(f"| {name} | error: {r['error']} |")
            continue
        falls = "; ".join(f"{k} ({v})" for k, v in r["fallbacks"].items()) or "-"
        rules = ", ".join(f"{k} x{v}" for k, v in sorted(r["findings"].items())) or "-"
        print(f"| {name} | {r['target']} | {r['torchao_filter']} | {r['plan']} | {r['plan_with_info']} | "
              f"{falls} | {rules} |", flush=True)


if __name__ == "__main__":
    main()
