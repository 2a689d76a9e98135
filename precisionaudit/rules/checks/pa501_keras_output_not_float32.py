"""PA501 keras-output-not-float32: under a mixed policy, a Keras model's output layer computes
in float16/bfloat16 (the mixed-precision guide's first rule: keep the output in float32)."""
from __future__ import annotations

from ...core.numerics import LOW_PRECISION_NAMES as LOW
from ..registry import Hit, check


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
        layer = layers.get(node["module"])
        if layer is None or layer["compute_dtype"] not in LOW:
            continue  # a float32 layer whose output is low was handed low values: not its policy
        seen.add(out["node"])
        hits.append(Hit(out["node"], {"layer": node["module"] or "<model>", "layer_type": layer["type"],
                                      "policy": layer["policy"], "output_dtype": out["dtype"]}))
    return hits
