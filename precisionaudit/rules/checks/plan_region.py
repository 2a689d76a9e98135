"""What a plan keeps in fp32 for a measured chain (PA301, PA302), and numbers as a report has them."""
from __future__ import annotations


def common_module(graph, nodes) -> str:
    """The innermost module containing every node (a plan region must hold the whole chain:
    a region's outputs go back to the low dtype when its module returns)."""
    paths = [graph.nodes[n].get("module", "").split(".") for n in nodes]
    common = []
    for parts in zip(*paths):
        if len(set(parts)) != 1:
            break
        common.append(parts[0])
    return ".".join(p for p in common if p)


def number(value) -> float | None:
    """A measured statistic (numpy or Python) as the float a JSON report holds."""
    return None if value is None else float(value)
