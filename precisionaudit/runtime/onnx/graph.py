"""Graph helpers shared by the ONNX plan, conversion and check.

Plans name ONNX nodes, so every stage must agree on the names: nodes an exporter left
unnamed get the same deterministic name everywhere (the IR's own scheme for the nodes
the scan reports, so a finding's ``node`` is a name the converter can block).
"""
from __future__ import annotations

import ast
from collections import defaultdict

from onnx import TensorProto

FLOAT, FLOAT16, BFLOAT16 = TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.BFLOAT16
LOW_TYPES = {"float16": FLOAT16, "bfloat16": BFLOAT16}

#: ONNX op type → canonical op (the names the PyTorch frontend and the rules use).
CANONICAL = {
    "Softmax": "softmax", "LogSoftmax": "log_softmax", "LayerNormalization": "layer_norm",
    "GroupNormalization": "group_norm", "BatchNormalization": "batch_norm",
    "InstanceNormalization": "instance_norm", "RMSNormalization": "rms_norm",
    "SimplifiedLayerNormalization": "rms_norm", "ReduceSum": "sum", "ReduceMean": "mean",
    "ReduceProd": "prod", "ReduceLogSumExp": "logsumexp", "ReduceL2": "norm",
    "ReduceSumSquare": "sum", "CumSum": "cumsum", "Exp": "exp", "Log": "log", "Pow": "pow",
    "Reciprocal": "reciprocal", "Sqrt": "sqrt", "Softplus": "softplus", "MatMul": "matmul",
    "Gemm": "linear", "Conv": "conv", "ConvTranspose": "conv_transpose", "LSTM": "lstm",
    "GRU": "gru", "RNN": "rnn_tanh", "Where": "where", "Add": "add", "Sub": "sub", "Mul": "mul",
    "Div": "div", "Cast": "to", "CastLike": "to", "Range": "arange", "Gather": "embedding",
    "Sigmoid": "sigmoid", "Tanh": "tanh", "Relu": "relu", "Gelu": "gelu", "Erf": "erf",
    "Max": "maximum", "Min": "minimum", "Clip": "clamp", "Neg": "neg", "Abs": "abs",
    "Einsum": "einsum", "Attention": "scaled_dot_product_attention",
}
#: ops that only move data: no node, edges pass through them (as views do in PyTorch).
TRANSPARENT = {"Reshape", "Transpose", "Squeeze", "Unsqueeze", "Flatten", "Identity",
               "Expand", "Slice", "Split", "Concat", "Shape", "Size", "Constant",
               "ConstantOfShape", "Dropout"}
FLOAT_TYPES = {1: "float32", 10: "float16", 16: "bfloat16", 11: "float64"}
INT_TYPES = {6: "int32", 7: "int64", 9: "bool", 2: "uint8", 3: "int8"}
STANDARD_DOMAINS = {"", "ai.onnx", "ai.onnx.ml", "com.microsoft"}


def canonical_op(node) -> str:
    """The IR op of an ONNX node: ``softmax`` for ``Softmax``, ``domain::Op`` for custom ops."""
    if node.domain not in STANDARD_DOMAINS:
        return f"{node.domain}::{node.op_type}"
    return CANONICAL.get(node.op_type, node.op_type.lower())


def name_nodes(graph) -> list[str]:
    """Give unnamed nodes of ``graph`` a stable name (in place); returns every node's name.

    Compute nodes get the scan's name (``softmax_0``: canonical op and occurrence);
    data-movement nodes, which the scan does not report, ``Reshape_t3`` (their index).
    """
    taken = {n.name for n in graph.node if n.name}
    counts: dict[str, int] = defaultdict(int)
    names = []
    for index, node in enumerate(graph.node):
        if node.op_type in TRANSPARENT:
            candidate = f"{node.op_type}_t{index}"
        else:
            op = canonical_op(node)
            candidate = f"{op}_{counts[op]}"
            counts[op] += 1
        if not node.name:
            while candidate in taken:
                candidate += "_"
            node.name = candidate
            taken.add(candidate)
        names.append(node.name)
    return names


def consumers(graph) -> dict[str, list]:
    """Tensor name → the nodes of ``graph`` that read it, in graph order."""
    readers = defaultdict(list)
    for node in graph.node:
        for name in node.input:
            if name:
                readers[name].append(node)
    return readers


def producers(graph) -> dict:
    """Tensor name → the node of ``graph`` that writes it."""
    return {out: node for node in graph.node for out in node.output if out}


def tensor_info(model) -> dict[str, tuple[int, tuple | None]]:
    """Tensor name → (ONNX element type, dims or None where the rank is unknown) from the
    inputs, outputs, value_info and initializers; a dim without a value (or -1) is None."""
    info = {}
    graph = model.graph
    for vi in [*graph.input, *graph.output, *graph.value_info]:
        if vi.type.HasField("tensor_type"):
            t = vi.type.tensor_type
            dims = tuple(d.dim_value if d.HasField("dim_value") and d.dim_value >= 0 else None
                         for d in t.shape.dim)  # -1: dynamic, as some exporters write it
            info[vi.name] = (t.elem_type, dims if t.HasField("shape") else None)
    for init in graph.initializer:
        info[init.name] = (init.data_type, tuple(init.dims))
    return info


def elem_types(model) -> dict[str, int]:
    """Tensor name → ONNX element type (see ``tensor_info``)."""
    return {name: elem for name, (elem, _) in tensor_info(model).items()}


def low_precision_tensor(model) -> tuple[str, str] | None:
    """(tensor name, dtype) of a float16/bfloat16 tensor the file already has (an input,
    output, initializer, typed intermediate, constant or cast target), or None for a
    float32 graph. Such a file was converted already (by ``convert``, ModelOpt or by hand):
    it is judged as its dtypes are, and it is no reference for ``check``."""
    low = {code: name for name, code in LOW_TYPES.items()}
    for name, code in elem_types(model).items():
        if code in low:
            return name, low[code]
    for node in model.graph.node:
        for attr in node.attribute:
            if node.op_type == "Cast" and attr.name == "to" and attr.i in low:
                return node.output[0], low[attr.i]
            if node.op_type == "Constant" and attr.name == "value" and attr.t.data_type in low:
                return node.output[0], low[attr.t.data_type]
    return None


def refuse_converted(model, source: str, instead: str) -> None:
    """``plan``, ``convert`` and ``check`` start from the float32 graph: a UsageError saying
    ``instead`` for a file that is mixed precision already."""
    from ...core.errors import UsageError

    low = low_precision_tensor(model)
    if low:
        raise UsageError(f"{source}: already has {low[1]} tensors ({low[0]!r}): {instead}")


def attribute(node, name, default=None):
    """The value of a node attribute, or ``default``."""
    from onnx import helper

    for attr in node.attribute:
        if attr.name == name:
            return helper.get_attribute_value(attr)
    return default


def module_of(node) -> str:
    """`named_modules()`-style path: from the dynamo exporter's name scopes, else the name."""
    for prop in node.metadata_props:
        if prop.key == "pkg.torch.onnx.name_scopes":
            try:
                scopes = ast.literal_eval(prop.value)
            except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                break
            if not isinstance(scopes, list) or not all(isinstance(s, str) for s in scopes):
                break  # not what the exporter writes: fall back on the node name
            return scopes[-2] if len(scopes) >= 2 else ""
    parts = [p for p in node.name.split("/") if p]
    return ".".join(parts[:-1]) if len(parts) > 1 else ""


def source_of(node) -> tuple[str | None, int | None]:
    """(file, line) of the user code that made ``node``, from the dynamo exporter's stack trace."""
    for prop in node.metadata_props:
        if prop.key == "pkg.torch.onnx.stack_trace" and prop.value.startswith("File "):
            first = prop.value.split("\n", 1)[0]  # File "/x/model.py", line 8, in forward
            try:
                file = first.split('"')[1]
                line = int(first.split("line ")[1].split(",")[0])
                return file, line
            except (IndexError, ValueError):
                return None, None
    return None, None
