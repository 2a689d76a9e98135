"""The GEMM and conv sizes a model fixes, and the multiples Tensor Cores want (PA2xx)."""
from __future__ import annotations

import math

from ...analysis.facts import fact
from ...ir.graph import producers

#: the multiple of 8 fp16/bf16 Tensor Core GEMMs want; vocabulary-sized dims (VOCAB_MIN and
#: up) want VOCAB_ALIGN
ALIGN = {"float16": 8, "bfloat16": 8}
VOCAB_MIN, VOCAB_ALIGN = 8192, 64


def _from_softmax(graph, name) -> bool:
    """The GEMM's left operand is a softmax's probabilities (probs @ v)."""
    preds = producers(graph, name) if name is not None else []
    return bool(preds) and graph.nodes[preds[0]]["op"] in ("softmax", "_softmax")


def gemm_dims(graph, node, name=None) -> list[tuple[str, int]]:
    """[(name, size)] of the GEMM dims the model fixes (weights, head dims), not the batch."""
    if node["op"] == "linear" or (node["params"] and node["op"] in ("addmm", "mm")):
        weights = [shape for _, shape in node["params"] if shape and len(shape) == 2]
        if weights and None not in weights[0]:
            n, k = weights[0]
            return [("N (out_features)", n), ("K (in_features)", k)]
    if node["op"] in ("matmul", "bmm", "mm", "baddbmm") and len(node["in_shapes"]) >= 2:
        a, b = node["in_shapes"][:2]
        if a and b and len(a) >= 2 and len(b) >= 2:
            runtime = graph.graph.get("input_dims", set())
            dims = [("K", a[-1]), ("N", b[-1])]
            if not node["params"]:
                # two activations: the key count (N of logits feeding a softmax, K of the
                # probabilities times v) and any dim equal to the left operand's rows (the
                # tokens) are set by the input, not the model
                runtime = runtime | {a[-2]}
                if fact(node, "attention.feeds_softmax"):
                    dims = dims[:1]
                if _from_softmax(graph, name):
                    dims = dims[1:]
            # a matrix-vector product (N or K of 1) has no Tensor Core path to pad towards
            return [(n, d) for n, d in dims if d is not None and d not in runtime and d > 1]
    return []


def padded(size: int, multiple: int) -> tuple[int, float]:
    """(size rounded up to ``multiple``, the share of the padded size that is padding, in %)."""
    up = math.ceil(size / multiple) * multiple
    return up, round(100 * (up - size) / up, 1)


def node_of_module(graph, module):
    """The first op the module ran (None: it ran none)."""
    return next((n for n, a in graph.nodes(data=True) if a["module"] == module), None)
