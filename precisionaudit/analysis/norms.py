"""Hand-written normalisation: mean of squares, variance as c * c, rsqrt/sqrt of a variance."""
from ..ir.graph import producers
from .facts import NormFacts


def _is_square(graph, name) -> bool:
    node = graph.nodes[name]
    if node["op"] in ("pow", "square"):
        return node["op"] == "square" or any(v == 2 for _, v in node["scalars"])
    if node["op"] == "mul":
        preds = producers(graph, name)
        # x * x: one producer feeding both operands
        return len(preds) == 1 and len(node["in_dtypes"]) == 2
    return False


def annotate(graph):
    for name, node in graph.nodes(data=True):
        if node["op"] in ("mean", "sum") and any(_is_square(graph, p) for p in producers(graph, name)):
            square = [p for p in producers(graph, name) if _is_square(graph, p)][-1]
            node["norm"] = NormFacts("mean of squares", square_node=square,
                                     square_dtype=graph.nodes[square]["compute_dtype"])
        elif node["op"] in ("rsqrt", "sqrt"):
            preds = producers(graph, name)
            chain = preds + [q for p in preds if graph.nodes[p]["op"] == "add" for q in producers(graph, p)]
            if any(graph.nodes[p]["op"] in ("var", "mean", "var_mean") for p in chain):
                node["norm"] = NormFacts("rsqrt of a variance")
