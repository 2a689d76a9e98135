"""Load an ONNX model file: the ONNX model source of every command (scan, explain, plan,
convert and check). Nothing of the model runs.

What every command refuses in an ONNX file before reading its graph: names that are not
UTF-8 text, tensors whose data does not match their declared dims or type, and cycles.

ONNX files are data, often from unknown sources; a file that onnx can parse may still be
malformed. Checked once in ``load_onnx`` (scan, explain, plan, convert and check all load
through it), each problem is one line naming the tensor or the nodes, not a crash deep in
a pass.
"""
from __future__ import annotations

import os

import networkx as nx

from ...core.errors import CaptureError
from .io import infer_shapes


def load_onnx(path: str, shapes: bool = True):
    """The ModelProto with external data (and, with ``shapes``, the shapes onnx shape
    inference derives), or a CaptureError."""
    import onnx

    if not os.path.isfile(path):
        raise CaptureError(f"{path}: no such file")
    try:
        model = onnx.load(path, load_external_data=False)
    except Exception as exc:  # noqa: BLE001 - DecodeError and friends: not a model
        raise CaptureError(f"{path}: not a readable ONNX model ({type(exc).__name__})") from exc
    if not model.graph.node and not model.graph.output:
        raise CaptureError(f"{path}: not a readable ONNX model (empty or truncated graph)")
    try:
        onnx.load_external_data_for_model(model, os.path.dirname(os.path.abspath(path)))
    except (OSError, onnx.checker.ValidationError, ValueError) as exc:
        raise CaptureError(f"{path}: {_external_data_problem(exc)}") from exc
    check_structure(model, path)
    _drop_trailing_empty_inputs(model)
    if shapes:
        infer_shapes(model, path)  # a failure leaves tensors untyped; capture_onnx reports it
    return model


def _drop_trailing_empty_inputs(model) -> None:
    """``LayerNormalization(x, w, "")``: an omitted optional input written as "" at the end
    means the same as leaving it out, and onnxruntime's graph optimizer crashes the process
    (segfault, onnxruntime 1.2x) on some such nodes. Left out, every command sees one model."""
    for node in model.graph.node:
        while node.input and node.input[-1] == "":
            node.input.pop()


def _external_data_problem(exc: Exception) -> str:
    """What onnx's refusal to load a model's external data means, in one line."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    stored = text.split(" should be stored in ")[-1].split(",")[0]
    if "symbolic link" in text:
        return f"external data {stored} is a symbolic link, which onnx refuses to follow (put the file itself there)"
    if "exceeds available data" in text:
        return f"external data shorter than declared: {text}"
    if isinstance(exc, OSError) and exc.filename:
        return f"external data missing: {exc.filename}" if isinstance(exc, FileNotFoundError) \
            else f"external data {exc.filename}: {exc.strerror}"
    return f"external data missing: {stored}" if " should be stored in " in text else f"external data: {text}"

def check_structure(model, path: str) -> None:
    """Raise a CaptureError for a name that is not text, a malformed tensor or a cyclic graph."""
    for where, value in _texts(model):
        if isinstance(value, bytes):  # protobuf hands a string that is not UTF-8 over as bytes
            raise CaptureError(f"{path}: not a valid ONNX model: the {where} is not UTF-8 text ({value[:40]!r})")
    for init in model.graph.initializer:
        _check_tensor(init, f"initializer {init.name!r}", path)
    for node in model.graph.node:
        if node.op_type == "Constant":
            for attr in node.attribute:
                if attr.name == "value":
                    _check_tensor(attr.t, f"Constant node {node.name or node.output[:1]!r}", path)
    cycle = find_cycle(model.graph)
    if cycle:
        raise CaptureError(f"{path}: not a valid ONNX model: the graph has a cycle "
                           f"({' -> '.join(cycle)}); a graph's nodes must not depend on themselves")


def _texts(model):
    """(where, value) of every string of the model that later code treats as text."""
    graph = model.graph
    yield from (("graph name", graph.name), ("producer name", model.producer_name))
    yield from ((f"model metadata {p.key!r}", t) for p in model.metadata_props for t in (p.key, p.value))
    yield from (("opset domain", o.domain) for o in model.opset_import)
    for i, node in enumerate(graph.node):
        where = f"node #{i}"
        yield from ((f"{where} {field}", getattr(node, field)) for field in ("name", "op_type", "domain"))
        yield from ((f"{where} input/output name", name) for name in (*node.input, *node.output))
        yield from ((f"{where} attribute name", a.name) for a in node.attribute)
        yield from ((f"{where} metadata", t) for p in node.metadata_props for t in (p.key, p.value))
    for info in (*graph.input, *graph.output, *graph.value_info):
        yield "value name", info.name
        if info.type.HasField("tensor_type"):
            yield from ((f"dim name of {info.name!r}", d.dim_param) for d in info.type.tensor_type.shape.dim)
    yield from (("initializer name", init.name) for init in graph.initializer)


def _check_tensor(tensor, what: str, path: str) -> None:
    from onnx import numpy_helper

    if any(d < 0 for d in tensor.dims):
        raise CaptureError(f"{path}: {what} has negative dims {list(tensor.dims)}")
    try:
        numpy_helper.to_array(tensor)  # a view for raw data: the check is the reshape
    except Exception as exc:  # noqa: BLE001 - onnx raises ValueError, TypeError, KeyError...
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise CaptureError(f"{path}: {what} (dims {list(tensor.dims)}, {_type_name(tensor.data_type)}) "
                           f"does not match its data: {reason}") from exc


def _type_name(data_type: int) -> str:
    from onnx import TensorProto

    try:
        return TensorProto.DataType.Name(data_type)
    except ValueError:
        return f"unknown data type {data_type}"


def find_cycle(graph) -> list[str]:
    """Node names along a dependency cycle (the first repeated at the end), or []."""
    producer = {out: i for i, node in enumerate(graph.node) for out in node.output if out}
    deps = nx.DiGraph()
    deps.add_nodes_from(range(len(graph.node)))
    deps.add_edges_from((producer[name], i) for i, node in enumerate(graph.node)
                        for name in node.input if name in producer)
    try:
        edges = nx.find_cycle(deps)
    except nx.NetworkXNoCycle:
        return []
    names = [graph.node[a].name or f"{graph.node[a].op_type}#{a}" for a, _ in edges]
    return [*names, names[0]]
