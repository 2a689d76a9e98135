"""PA501 keras-output-not-float32: under a mixed policy, a Keras model's output layer computes
in float16/bfloat16 (the mixed-precision guide's first rule: keep the output in float32)."""
from __future__ import annotations

from ...core.numerics import LOW_PRECISION_NAMES as LOW
from ...ir.graph import producers
from ..registry import Hit, check

#: what a model's prediction comes from: probabilities, or logits from a GEMM or convolution
PREDICTIONS = {"softmax", "log_softmax", "sigmoid", "linear", "matmul", "einsum", "addmm", "bmm",
               "conv1d", "conv2d", "conv3d"}
#: ops that hand a prediction on as one (the backend's casts and views; the log of probabilities)
CARRY = {"to", "float", "half", "type_as", "view", "reshape", "getitem", "contiguous", "squeeze", "flatten",
         "log"}


@check
def keras_output_not_float32(graph, target):
    layers = graph.graph.get("keras_layers")  # a Keras model's layers and their dtype policies
    if not layers:
        return []
    hits, seen = [], set()
    for out in graph.graph.get("outputs", []):
        if out["dtype"] not in LOW or out["node"] is None or out["node"] in seen:
            continue
        node = graph.nodes[out["node"]]
        if not _prediction(graph, out["node"]):
            continue  # hidden states (a backbone's normalised or activated features), not a prediction
        layer = layers.get(node["module"])
        if layer is None or layer["compute_dtype"] not in LOW:
            continue  # a float32 layer whose output is low was handed low values: not its policy
        seen.add(out["node"])
        hits.append(Hit(out["node"], {"layer": node["module"] or "<model>", "layer_type": layer["type"],
                                      "policy": layer["policy"], "output_dtype": out["dtype"]}))
    return hits


def _prediction(graph, name, depth=4) -> bool:
    """Whether ``name``'s value is a prediction a loss reads (probabilities or logits), through
    casts and views: a backbone's outputs (a norm's, a tanh pooler's) are features for a head."""
    op, inputs = graph.nodes[name]["op"], producers(graph, name)
    if op in PREDICTIONS:
        return True
    if op == "add":  # a Dense's bias add: the logits plus a (cast) 1-D variable
        computed = [p for p in inputs if not _bias(graph, p)]
        return depth > 0 and len(computed) == 1 and _prediction(graph, computed[0], depth - 1)
    return depth > 0 and op in CARRY and any(_prediction(graph, p, depth - 1) for p in inputs)


def _bias(graph, name) -> bool:
    node = graph.nodes[name]
    return (node["op"] in CARRY and not producers(graph, name) and bool(node["params"])
            and all(len(shape) == 1 for _, shape in node["params"]))
