"""What every command refuses in an ONNX file before reading its graph: tensors whose data
does not match their declared dims or type, and cycles.

ONNX files are data, often from unknown sources; a file that onnx can parse may still be
malformed. Checked once in ``load_onnx`` (scan, explain, plan, convert and check all load
through it), each problem is one line naming the tensor or the nodes, not a crash deep in
a pass.
"""
from __future__ import annotations

import networkx as nx

from ...core.errors import CaptureError


def check_structure(model, path: str) -> None:
    """Raise a CaptureError for a malformed tensor or a cyclic graph."""
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
