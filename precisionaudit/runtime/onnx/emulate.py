"""Run a float16 ONNX model on onnxruntime's CPU provider with float16 numerics.

onnxruntime's CPU provider has float16 kernels for few ops. For the rest it runs whole
connected regions of the graph in float32 and casts only at their borders, so a value
in the middle of such a region is never rounded to float16: ``Exp`` of 12 followed by
a ``Mul`` gives 162.75 on the CPU where a GPU gives inf. A check run that way would
pass models that overflow on the GPU.

``emulate`` rewrites a converted model into one that computes every node in float32
and rounds each float16 result explicitly (``Cast`` to float16 and back, which
onnxruntime keeps because it loses precision): each node sees exactly the float16
values a float16 kernel would be handed, and the model's converted weights stay the
float16 values they are. Nodes kept in float32 are left alone. This is the same
emulation the PyTorch check uses for ops without a CPU kernel (computed in float32,
rounded to the low dtype).
"""
from __future__ import annotations

import onnx
from onnx import helper, numpy_helper

from .graph import FLOAT, FLOAT16, elem_types
from .io import infer_shapes, session

#: ops whose float16 result is one of their float16 inputs' values: nothing to round.
EXACT = {"Reshape", "Transpose", "Squeeze", "Unsqueeze", "Flatten", "Identity", "Expand", "Slice",
         "Split", "Concat", "Gather", "GatherElements", "GatherND", "Tile", "Where", "Max", "Min",
         "ReduceMax", "ReduceMin", "Relu", "Neg", "Abs", "MaxPool", "Dropout", "Pad",
         "SpaceToDepth", "DepthToSpace", "ScatterND", "ScatterElements", "Constant"}
NOTE = ("onnxruntime's CPU provider runs float16 ops without a CPU kernel in float32 and "
        "rounds only at the borders of such regions; the converted variants are run with "
        "every node computed in float32 and its float16 result rounded to float16, as a "
        "float16 GPU kernel that accumulates in float32 hands it on")


def emulate(model) -> tuple[onnx.ModelProto, dict[str, list[str]]]:
    """(the emulating fp32 model, node name → the names of its outputs as consumers see them)."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    types = result_types(model)
    outputs = {node.name: list(node.output) for node in out.graph.node}
    _rewrite(out.graph, types)
    return out, outputs


def result_types(model) -> dict[str, int]:
    """Tensor name → element type, for every result the emulation may have to round.

    onnx shape inference types most results; those it leaves untyped (an op it does not
    know, an inference error) get the type onnxruntime gives them, so that no float16
    result goes unrounded because a type was missing."""
    typed = onnx.ModelProto()
    typed.CopyFrom(model)
    infer_shapes(typed)
    types = elem_types(typed)
    missing = [name for node in model.graph.node if node.op_type not in EXACT | {"Cast"}
               for name in node.output if name and not types.get(name)]
    if missing:
        types.update(_runtime_types(model, missing))
    return types


def _runtime_types(model, names) -> dict[str, int]:
    """The float16 tensors among ``names``, as onnxruntime types them when it loads ``model``."""
    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    present = {o.name for o in probe.graph.output}
    probe.graph.output.extend(onnx.ValueInfoProto(name=n) for n in names if n not in present)
    try:
        outputs = session(probe, optimize=False).get_outputs()
    except Exception:  # noqa: BLE001 - a model that does not load fails its run, which says why
        return {}
    return {o.name: FLOAT16 for o in outputs if o.type == "tensor(float16)"}


def _rewrite(graph, types: dict) -> None:
    for vi in [*graph.input, *graph.output, *graph.value_info]:
        if vi.type.tensor_type.elem_type == FLOAT16:
            vi.type.tensor_type.elem_type = FLOAT
    for index, init in enumerate(graph.initializer):
        if init.data_type == FLOAT16:
            graph.initializer[index].CopyFrom(
                numpy_helper.from_array(numpy_helper.to_array(init).astype("float32"), init.name))
    rewritten = []
    for node in graph.node:
        for attr in node.attribute:
            _widen_attribute(attr, types)
        rewritten.append(node)
        if node.op_type == "Cast" and any(a.name == "to" and a.i == FLOAT16 for a in node.attribute):
            low = node.output[0] + "__pa_f16"
            rewritten.append(helper.make_node("Cast", [low], [node.output[0]], to=FLOAT,
                                              name=node.name + "__pa_up"))
            node.output[0] = low
            continue
        if node.op_type in EXACT or node.op_type == "Cast":
            continue
        for i, name in enumerate(node.output):
            if name and types.get(name) == FLOAT16:
                wide, low = name + "__pa_f32", name + "__pa_f16"
                node.output[i] = wide
                rewritten.append(helper.make_node("Cast", [wide], [low], to=FLOAT16,
                                                  name=f"{node.name}__pa_round{i}"))
                rewritten.append(helper.make_node("Cast", [low], [name], to=FLOAT,
                                                  name=f"{node.name}__pa_up{i}"))
    del graph.node[:]
    graph.node.extend(rewritten)


def _widen_attribute(attr, types) -> None:
    """float16 constants and dtype attributes inside a node (and its subgraphs) → float32."""
    if attr.t.data_type == FLOAT16:
        attr.t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(attr.t).astype("float32"),
                                                attr.t.name))
    for t in attr.tensors:
        if t.data_type == FLOAT16:
            t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t).astype("float32"), t.name))
    if attr.name == "dtype" and attr.type == onnx.AttributeProto.INT and attr.i == FLOAT16:
        attr.i = FLOAT
    if attr.type == onnx.AttributeProto.GRAPH:
        _rewrite(attr.g, types)
    for g in attr.graphs:
        _rewrite(g, types)
