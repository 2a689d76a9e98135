"""PA617 fp4-wgrad-error: an FP4 Linear's emulated Wgrad GEMM below torchao's SQNR floor, ranked."""
from __future__ import annotations

from ...analysis.facts import fact
from ..registry import Hit, check, param
from .fp4_range_values import base_values, db, measured
from .plan_region import number

HOW = {"nvfp4": "RHT on dY and X along the tokens, stochastic rounding on dY",
       "mxfp4": "32-value blocks along the tokens, rounded to nearest"}


def wgrad_ranking(graph) -> list[tuple[str, float]]:
    """(module, Wgrad SQNR in dB) of every measured FP4 Linear, worst first (each module once)."""
    seen = {}
    for _, node in graph.nodes(data=True):
        sqnr = fact(node, "fp4_range.wgrad") and node["fp4_range"].sqnr_db("wgrad")
        if sqnr is not None and node["fp4"].runs_fp4:
            seen.setdefault(node["module"], sqnr)
    return sorted(seen.items(), key=lambda item: item[1])


def _ordinal(n: int) -> str:
    return "worst" if n == 1 else f"{n}{'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')} worst"


@check
def fp4_wgrad_error(graph, name, node, target):
    found = measured(node)
    if found is None:
        return None
    facts, ranges = found
    sqnr = ranges.sqnr_db("wgrad")
    if sqnr is None or sqnr >= param("test_floor"):
        return None
    warn = sqnr < param("floor")
    bar = (f"{param('floor'):g} dB, where its error is a third of the gradient's amplitude" if warn
           else f"torchao's test floor of {param('test_floor'):g} dB")
    ranking = [module for module, _ in wgrad_ranking(graph)]
    rank = ranking.index(node["module"]) + 1
    block = f", in block {facts.block} of {facts.blocks}" if facts.block is not None else ""
    return Hit(name, {**base_values(facts, ranges), "how": HOW[facts.format], "sqnr": number(sqnr),
                      "sqnr_text": db(sqnr), "bar_text": bar, "rank": rank, "rank_text": _ordinal(rank),
                      "count": len(ranking), "block_text": block}, case=None if warn else "near")
