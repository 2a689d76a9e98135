"""The range pass on an ONNX model: onnxruntime runs over the calibration batches (--data).

Per batch, one fp32 run of the model with every float intermediate result exposed as a
graph output (the per-node statistics of ``core.values.value_stats``, merged over the
batches; each batch's results are summarised and dropped before the next), and one run of
the model converted to float16 the way ``convert`` writes it, emulated node by node as
``check`` runs it, to find the node whose result first turns inf/NaN. Node names are those
``name_nodes`` gives, which are the IR's node names.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ...core.errors import UsageError
from ...core.values import ValueOptions, merge, value_stats
from ...runtime.data import onnx_batches
from ...runtime.onnx.graph import name_nodes
from ...runtime.onnx.io import session, with_outputs
from ...runtime.onnx.load import load_onnx
from .model import Tensors


@dataclass
class OnnxMeasurement:
    nodes: dict = field(default_factory=dict)  # node name → merged statistics of its result
    first_nonfinite: dict = field(default_factory=dict)  # batch → node of the first inf/NaN
    batches: int = 0


def watched_results(model) -> list[tuple[str, str]]:
    """(node name, its first output) for the float32 results of the model's nodes."""
    tensors = Tensors(model)
    return [(node.name, node.output[0]) for node in model.graph.node
            if node.op_type != "Constant" and node.output and node.output[0]
            and tensors.dtype(node.output[0]) == "float32"]


def measure_onnx(path: str, target, values: ValueOptions) -> OnnxMeasurement:
    """Per-node ranges over the batches, and where the float16 run first goes non-finite."""
    from ...runtime.onnx.inputs import graph_inputs

    if values.weights:
        raise UsageError(f"{path}: --weights is for PyTorch model files; an ONNX model's "
                         "initializers are its weights")
    model = load_onnx(path)
    name_nodes(model.graph)
    watched = watched_results(model)
    inputs = [i.name for i in graph_inputs(model)]
    reference = _exposed_session(model, [t for _, t in watched], path)
    low, low_names = _low_session(model, watched, path)
    result = OnnxMeasurement()
    for batch, feeds in enumerate(onnx_batches(values.data, inputs, values.batches)):
        got = _run(reference, feeds, path, batch)
        for node, tensor in watched:
            if tensor in got:
                result.nodes[node] = merge(result.nodes.get(node), value_stats(got[tensor], target.dtype),
                                           batch)
        del got
        if low is not None:
            first = _first_nonfinite(_run(low, feeds, path, batch), low_names)
            if first is not None:
                result.first_nonfinite[batch] = first
        result.batches = batch + 1
    return result


def _exposed_session(model, names, path):
    try:
        return session(with_outputs(model, names))
    except Exception as exc:  # noqa: BLE001 - onnxruntime's load errors: bad input
        raise UsageError(f"{path}: onnxruntime cannot load it: {str(exc).splitlines()[0]}") from exc


def _low_session(model, watched, path):
    """The float16 conversion's emulated session and [(node, exposed name)], or (None, [])
    when the model does not convert (the scan reports that elsewhere)."""
    from ...runtime.onnx.emulate import emulate
    from ...runtime.onnx.float16 import to_float16

    try:
        conversion = to_float16(model, keep_io_types=True, source=path)
    except UsageError:
        return None, []
    emulated, visible = emulate(conversion.model)
    names = [(node, visible[node][0]) for node, _ in watched if visible.get(node)]
    try:
        return _exposed_session(emulated, [n for _, n in names], path), names
    except UsageError:
        return None, []


def _run(sess, feeds, path, batch) -> dict:
    try:
        outputs = sess.run(None, feeds)
    except Exception as exc:  # noqa: BLE001 - a batch of the wrong shape or dtype
        raise UsageError(f"--data: onnxruntime cannot run {path} on batch {batch}: "
                         f"{str(exc).splitlines()[0]}") from exc
    return {o.name: v for o, v in zip(sess.get_outputs(), outputs)}


def _first_nonfinite(got: dict, names) -> str | None:
    for node, name in names:  # graph order
        value = got.get(name)
        if value is not None and not np.isfinite(value).all():
            return node
    return None
