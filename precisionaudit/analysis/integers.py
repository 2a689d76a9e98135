"""Integer-valued float data (positions, counts, indices) and the largest value it can hold."""
import networkx as nx

from ..ir.graph import producers
from .facts import IntegerFacts, fact

PASS_THROUGH = {"to", "float", "half", "bfloat16", "type_as", "unsqueeze", "expand", "getitem",
                "view", "reshape", "repeat", "index_select", "embedding_bag"}


def _arange_max(node) -> int | None:
    ints = [v for a, v in node["scalars"] if a == "arange" and isinstance(v, (int, float))]
    if not ints:
        return None
    if len(ints) == 1:
        return int(ints[0]) - 1
    start, end = ints[0], ints[1]
    return int(max(abs(start), abs(end) - 1))


def annotate(graph):
    for name in nx.topological_sort(graph):
        node = graph.nodes[name]
        bound = None
        if node["op"] == "arange":
            bound = _arange_max(node)
        elif node["op"] in ("cumsum",) and node["out_dtype"] and not node["out_dtype"].startswith(("float", "bfloat")):
            bound = fact(node, "reduction.extent")
        elif node["op"] in PASS_THROUGH:
            bounds = [fact(graph.nodes[p], "integer.largest") for p in producers(graph, name)]
            bounds = [b for b in bounds if b is not None]
            bound = max(bounds) if bounds else None
        if bound is not None:
            node["integer"] = IntegerFacts(bound)
