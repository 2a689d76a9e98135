"""Softmax probabilities (fused or written as exp / sum(exp)) and the ops that consume them.

CUDA's softmax accumulates in fp32 but stores its probabilities in the input dtype: in
fp16 every probability below 6e-8 is 0, so a log or a division downstream turns it into
-inf or inf. This pass marks softmax outputs and where they flow.
"""
from ..ir.graph import consumers, producers
from .facts import SoftmaxFacts

#: ops that carry the probabilities on unchanged (casts included: an fp16 zero upcast is still 0)
CARRY = {"to", "float", "half", "type_as", "getitem", "view", "reshape", "clone", "contiguous",
         "dropout", "masked_fill"}
#: ops for which a probability that rounded to 0 is fatal
LOG_OPS = {"log", "log2", "log10"}
DIVIDES = {"reciprocal"}


def _hand_written(graph, name) -> bool:
    """div(e, sum(e)) with e = exp(...): a softmax written by hand."""
    node = graph.nodes[name]
    if node["op"] != "div":
        return False
    preds = producers(graph, name)
    exps = [p for p in preds if graph.nodes[p]["op"] == "exp"]
    sums = [p for p in preds if graph.nodes[p]["op"] == "sum"]
    return any(e in producers(graph, s) for e in exps for s in sums)


def _fatal_consumer(graph, name, depth=4):
    """The first log/reciprocal/divisor use of the probabilities, through casts and views."""
    for c in consumers(graph, name):
        node = graph.nodes[c]
        if node["op"] in LOG_OPS or node["op"] in DIVIDES:
            return c
        if node["op"] == "div" and producers(graph, c)[-1:] == [name]:
            return c  # the probabilities are the divisor
        if node["op"] in CARRY and depth:
            found = _fatal_consumer(graph, c, depth - 1)
            if found:
                return found
    return None


def annotate(graph):
    for name, node in graph.nodes(data=True):
        if node["op"] in ("softmax",) or _hand_written(graph, name):
            node["softmax"] = SoftmaxFacts("softmax" if node["op"] == "softmax" else "hand-written softmax",
                                           probs_consumer=_fatal_consumer(graph, name))
