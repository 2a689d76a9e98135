"""PA111 low-precision-output: model outputs/logits leave the model in fp16/bf16."""
from __future__ import annotations

from ...core.numerics import LOW_PRECISION_NAMES as LOW
from ..registry import Hit, check


@check
def low_precision_output(graph, target):
    if graph.graph.get("keras_layers"):  # a Keras model's output layer is PA501's, with its policy
        return []
    hits = []
    for out in graph.graph.get("outputs", []):
        if out["dtype"] in LOW and out["node"] is not None:
            hits.append(Hit(out["node"], {"output_dtype": out["dtype"]}))
    return hits
