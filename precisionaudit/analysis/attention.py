"""matmul → (scale, mask) → softmax chains: which matmul makes the logits, where the scale is."""
from ..ir.graph import producers

GEMMS = {"matmul", "bmm", "baddbmm", "einsum", "mm"}
BETWEEN = {"div", "mul", "add", "sub", "masked_fill", "where", "to", "float", "half", "type_as",
           "clamp", "tanh"}
SCALES = {"div", "mul"}


def _scaled_by_scalar(node) -> bool:
    # `* 1.0` is no scale: T5 (transformers 5) runs its unscaled logits through `* scaling`
    # with scaling = 1.0
    return node["op"] in SCALES and any(isinstance(v, (int, float)) and v != 1
                                        for _, v in node["scalars"]) \
        or node["op"] in SCALES and len(node["in_dtypes"]) == 2


def annotate(graph):
    for name, node in list(graph.nodes(data=True)):
        if node["op"] not in ("softmax", "log_softmax"):
            continue
        scaled_after = False
        current = name
        for _ in range(8):
            preds = producers(graph, current)
            if not preds:
                break
            current = preds[0]
            cur = graph.nodes[current]
            if cur["op"] in GEMMS:
                pre_scaled = any(_scaled_by_scalar(graph.nodes[p]) for p in producers(graph, current))
                cur["feeds_softmax"] = name
                cur["scaled_after"] = scaled_after
                cur["scaled_before"] = pre_scaled
                node["logits_from"] = current
                break
            if cur["op"] not in BETWEEN:
                break
            if _scaled_by_scalar(cur):
                scaled_after = True
