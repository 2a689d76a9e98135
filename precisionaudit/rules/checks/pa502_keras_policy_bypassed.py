"""PA502 keras-policy-bypassed: a custom Keras layer under a float16/bfloat16 policy whose own
code makes float32 (a cast to ``floatx()`` or ``"float32"``, a float32 variable or constant
meeting the layer's tensors) and hands it on, so the policy does not apply to its ops."""
from __future__ import annotations

from ...core.numerics import LOW_PRECISION_NAMES as LOW
from ..registry import Hit, check


@check
def keras_policy_bypassed(graph, target):
    layers = graph.graph.get("keras_layers")  # a Keras model's layers and their dtype policies
    if not layers:
        return []
    outputs = {out["node"] for out in graph.graph.get("outputs", [])}
    own: dict[str, list] = {}  # custom low-policy layer -> its own ops, in execution order
    for name, node in graph.nodes(data=True):
        layer = layers.get(node["module"])
        if layer and not layer["builtin"] and layer["compute_dtype"] in LOW:
            own.setdefault(node["module"], []).append(name)
    hits = []
    for module, names in own.items():
        low = layers[module]["compute_dtype"]
        handed = [n for n in names if _hands_on_float32(graph, n, module, outputs)]
        if not handed:
            continue  # float32 kept inside the layer (an upcast softmax cast back) is deliberate
        origin = _origin(graph, handed[0], module, low)
        if origin is None:
            continue
        node = graph.nodes[origin]
        how = "casts its {low} values to float32" if node["explicit_cast"] else \
            "promotes its {low} values to float32 in a {op} with a float32 operand (a variable or constant made without the policy)"
        layer = layers[module]
        hits.append(Hit(origin, {"layer": module, "layer_type": layer["type"], "policy": layer["policy"],
                                 "compute_dtype": low, "how": how.format(low=low, op=node["op"])}))
    return hits


def _makes_float32(node, low: str) -> bool:
    """The op turns the layer's low-precision values into float32: an explicit cast, or type
    promotion with a float32 operand."""
    return node["out_dtype"] == "float32" and low in node["in_dtypes"]


def _hands_on_float32(graph, name: str, module: str, outputs: set) -> bool:
    """A float32 result of the layer's own code reaches another layer (a model output is the
    output layer's business: PA501 wants it float32)."""
    if graph.nodes[name]["out_dtype"] != "float32" or name in outputs:
        return False
    return any(graph.nodes[s]["module"] != module for s in graph.successors(name))


def _origin(graph, name: str, module: str, low: str) -> str | None:
    """The op of the layer where the float32 that ``name`` hands on was made: walking back
    through the layer's own float32 ops, the first that took the layer's low dtype."""
    seen, stack = set(), [name]
    while stack:
        current = stack.pop()
        if current in seen:
            continue
        seen.add(current)
        node = graph.nodes[current]
        if _makes_float32(node, low):
            return current
        stack += [p for p in graph.predecessors(current)
                  if graph.nodes[p]["module"] == module and graph.nodes[p]["out_dtype"] == "float32"]
    return None
