"""ONNX frontend: load a model file into the same IR as the PyTorch frontend.

Loading runs none of the model's code. Shapes come from onnx shape inference; constants
and initializers are real values, so a -1e9 mask or a weight above 65504 is seen. The
target for ONNX is a converted graph (``pure``): every float tensor in the low dtype,
minus the nodes a plan keeps in fp32 — unless the file is mixed precision already
(written by ``convert``, ModelOpt or by hand): then its dtypes are judged as they are.
"""
from __future__ import annotations

import numpy as np

from ...core.errors import CaptureError
from ...core.numerics import FP16_MAX
from ...core.text import first_few
from ...ir.capture import Capture
from ...ir.graph import OpNode, add_op, new_graph
from ...runtime.onnx.graph import (
    FLOAT_TYPES,
    INT_TYPES,
    STANDARD_DOMAINS,
    TRANSPARENT,
    canonical_op,
    consumers,
    low_precision_tensor,
    module_of,
    name_nodes,
    source_of,
    tensor_info,
)
from ...runtime.onnx.io import infer_shapes
from ...runtime.onnx.load import load_onnx


class Tensors:
    """Dtype, shape and (for constants) value of every tensor name in the graph."""

    def __init__(self, model):
        from onnx import numpy_helper

        self.info = tensor_info(model)
        self.values = {init.name: numpy_helper.to_array(init) for init in model.graph.initializer}
        for node in model.graph.node:
            if node.op_type == "Constant":
                for attr in node.attribute:
                    if attr.name == "value":
                        value = numpy_helper.to_array(attr.t)
                        self.values[node.output[0]] = value
                        self.info[node.output[0]] = (attr.t.data_type, tuple(attr.t.dims))
                    elif attr.name in ("value_float", "value_int"):
                        self.values[node.output[0]] = np.array(attr.f if attr.name == "value_float" else attr.i)
        self.initializers = {i.name for i in model.graph.initializer}

    def dtype(self, name):
        elem = self.info.get(name, (None, None))[0]
        return FLOAT_TYPES.get(elem) or INT_TYPES.get(elem)

    def shape(self, name):
        return self.info.get(name, (None, None))[1]


def capture_onnx(path: str, target) -> Capture:
    model = load_onnx(path, shapes=False)
    inference_failure = infer_shapes(model, path)
    tensors = Tensors(model)
    graph = new_graph(target=target)
    graph.graph["inputs"] = [(tensors.dtype(i.name), tensors.shape(i.name)) for i in model.graph.input
                             if i.name not in tensors.initializers]
    graph.graph["input_dims"] = {d for _, s in graph.graph["inputs"] if s for d in s if d}
    graph.graph["params"] = {n: tuple(v.shape) for n, v in tensors.values.items() if n in tensors.initializers}
    producer: dict[str, str | None] = {}
    unanalysed = set()
    low = target.dtype
    as_is = low_precision_tensor(model)

    def converted(dtype):
        if as_is:  # already mixed precision: the dtypes in the file are the ones that run
            return dtype
        return low if dtype in ("float32", "float16", "bfloat16") else dtype

    modules = {}
    untyped = []  # compute nodes whose result shape inference did not type
    names = name_nodes(model.graph)
    fused_scales = _scales_onnxruntime_fuses(model.graph, names, tensors)
    for node, name in zip(model.graph.node, names):
        if node.domain not in STANDARD_DOMAINS:
            unanalysed.add(f"{node.domain}::{node.op_type}")
        if node.op_type in TRANSPARENT:
            source = next((producer.get(i) for i in node.input if i in producer), None)
            for out in node.output:
                producer[out] = source
            continue
        op = canonical_op(node)
        in_dtypes = [tensors.dtype(i) for i in node.input if i]
        out_dtype = tensors.dtype(node.output[0]) if node.output else None
        if node.output and tensors.shape(node.output[0]) is None:
            untyped.append(name)
        compute = next((converted(d) for d in in_dtypes if d in FLOAT_TYPES.values()), converted(out_dtype))
        if node.op_type == "Cast":
            compute = converted(out_dtype)
        elif node.op_type == "LayerNormalization" and _stash_type(node) == 1:
            compute = "float32"  # the spec computes the mean and variance in stash_type (fp32)
        scalars, params = [], []
        axes = _axes_input(node)
        for i in node.input:
            value = tensors.values.get(i)
            if value is None or i == axes:  # an axes tensor is the op's dims, no operand value
                continue
            if value.size == 1:
                scalars.append([op, value.reshape(()).item()])
            elif i in tensors.initializers and value.dtype.kind == "f" and value.size:
                params.append([i, tuple(value.shape)])
                peak = float(np.abs(value).max())
                if peak > FP16_MAX:
                    scalars.append(["initializer", float(value.flat[int(np.abs(value).argmax())])])
        file, line = source_of(node)
        module = module_of(node)
        node_facts = OpNode(
            name=name, op=op, target=f"onnx::{node.op_type}", atens=[node.op_type],
            in_dtypes=[converted(d) for d in in_dtypes], in_shapes=[tensors.shape(i) for i in node.input if i],
            compute_dtype=compute, out_dtype=converted(out_dtype),
            out_shape=tensors.shape(node.output[0]) if node.output else None,
            scalars=scalars, params=params, fused_scale=fused_scales.get(name), module=module,
            module_type=node.op_type, file=file, line=line, explicit_cast=node.op_type in ("Cast", "CastLike"),
            dims=_axes(node, tensors))
        add_op(graph, node_facts)
        for arg, i in enumerate(node.input):
            source = producer.get(i)
            if source and source != name and not graph.has_edge(source, name):
                graph.add_edge(source, name, arg=arg)
        for out in node.output:
            producer[out] = name
        _module_facts(node, tensors, module or name, modules)
    graph.graph["modules"] = modules
    graph.graph["outputs"] = [{"node": producer.get(o.name), "dtype": converted(tensors.dtype(o.name)),
                               "shape": tensors.shape(o.name)} for o in model.graph.output]
    skipped = [f"unanalysed custom ops: {', '.join(sorted(unanalysed))}"] if unanalysed else []
    notes = [f"judged as the dtypes in the file are (it already has {as_is[1]} tensors: {as_is[0]!r})"
             if as_is else "judged as converted to " + low]
    if untyped or inference_failure:
        notes.append(untyped_note(untyped, inference_failure))
    return Capture(graph, "onnx", skipped=skipped, notes=notes)


def _scales_onnxruntime_fuses(graph, names, tensors) -> dict[str, str]:
    """MatMul → the Mul or Div by a constant scalar that alone reads its result. ONNX Runtime
    folds that scale into the GEMM (MatMulScaleFusion, a level-2 optimisation, on by default
    for the CPU and CUDA providers, fp16 included on CUDA): FusedMatMul's alpha, which cuBLAS
    applies to the fp32 accumulator before the fp16 store (onnxruntime/core/optimizer/
    matmul_scale_fusion.cc)."""
    readers = consumers(graph)
    name_of = {id(node): name for node, name in zip(graph.node, names)}
    outputs = {o.name for o in graph.output}
    overridable = {i.name for i in graph.input}  # an initializer a caller may feed is no constant
    fused = {}
    for node in graph.node:
        if node.op_type != "MatMul" or node.domain not in ("", "ai.onnx") or not node.output \
                or node.output[0] in outputs:
            continue
        found = readers.get(node.output[0], [])
        if len(found) != 1 or found[0].op_type not in ("Mul", "Div") or len(found[0].input) != 2:
            continue
        reader = found[0]
        scale_args = (1,) if reader.op_type == "Div" else (0, 1)  # x / s, x * s, s * x
        for arg in scale_args:
            scale, other = reader.input[arg], reader.input[1 - arg]
            value = tensors.values.get(scale)
            if (other == node.output[0] and scale not in overridable and value is not None
                    and value.size == 1 and value.ndim <= len(tensors.shape(other) or ())):
                fused[name_of[id(node)]] = name_of[id(reader)]
                break
    return fused


def untyped_note(untyped: list, failure: str | None) -> str:
    """The report's note on results onnx shape inference left without a type or shape."""
    why = f"onnx shape inference failed ({failure})" if failure else "onnx shape inference could not derive them"
    if not untyped:
        return f"{why}; every node result still has a declared type and shape"
    shown = first_few(untyped)
    return (f"{len(untyped)} node result(s) have no known shape ({shown}): {why}; rules that need "
            "a dtype or shape did not judge those nodes")


def _stash_type(node) -> int:
    return next((a.i for a in node.attribute if a.name == "stash_type"), 1)


def _axes_input(node) -> str | None:
    """The input that names a reduction's or a scan's axes (ReduceSum from opset 13, the other
    Reduce ops from 18, CumSum), or None."""
    if (node.op_type.startswith("Reduce") or node.op_type == "CumSum") and len(node.input) > 1:
        return node.input[1]
    return None


def _axes(node, tensors) -> list:
    from onnx import AttributeProto

    for attr in node.attribute:
        if attr.name == "axes" and attr.type == AttributeProto.INTS:
            return list(attr.ints)
        if attr.name == "axis" and attr.type == AttributeProto.INT:
            return [attr.i]
    if _axes_input(node):
        axes = tensors.values.get(_axes_input(node))
        if axes is not None and axes.dtype.kind in "iu":  # anything else is not an axes tensor
            return [int(a) for a in axes.ravel()]
    return []


def _module_facts(node, tensors, module, modules):
    """Linear / Embedding / Conv facts from weights, for the structure rules (PA202, PA203)."""
    weights = [tensors.values[i] for i in node.input if i in tensors.initializers and i in tensors.values]
    if node.op_type in ("MatMul", "Gemm") and weights and weights[0].ndim == 2:
        k, n = weights[0].shape
        transposed = any(a.name == "transB" and a.i for a in node.attribute)
        if transposed:
            k, n = n, k
        modules.setdefault(module, {"type": "Linear", "in_features": int(k), "out_features": int(n)})
    elif node.op_type == "Gather" and node.input and node.input[0] in tensors.initializers:
        table = tensors.values.get(node.input[0])
        if table is not None and table.ndim == 2 and table.dtype.kind == "f":
            modules.setdefault(module, {"type": "Embedding", "num_embeddings": int(table.shape[0]),
                                        "embedding_dim": int(table.shape[1])})
    elif node.op_type == "Conv" and weights and weights[0].ndim >= 3:
        groups = next((a.i for a in node.attribute if a.name == "group"), 1)
        out_c, in_per_group = weights[0].shape[:2]
        modules.setdefault(module, {"type": "Conv", "in_channels": int(in_per_group * groups),
                                    "out_channels": int(out_c), "groups": int(groups)})
