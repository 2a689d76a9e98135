"""onnxruntime sessions for in-memory models, load verification, atomic writes.

A converted model is verified before it is written: ``onnx.checker`` for the format and
an onnxruntime session for what the checker does not see (a Cast whose declared output
type no longer matches what it computes). A model that does not verify is one line
naming the node; a model that does is written to a temporary file beside the target and
renamed over it, so the target is never half written.
"""
from __future__ import annotations

import atexit
import contextlib
import os
import re
import shutil
import sys
import tempfile

from ...core.errors import UsageError

#: protobuf cannot serialise a model of 2 GiB or more: such models go through files.
PROTO_LIMIT = 2**31 - 1
_NODE_PATTERNS = (r"of node \(([^)]*)\)", r"[Nn]ode \(([^)]*)\)", r"node with name '([^']*)'",
                  r"Node:\s*(\S+)", r"node ([^\s:]+) ")


def require_onnx_extra() -> None:
    """A UsageError naming the missing package unless the ``onnx`` extra is installed."""
    import importlib.util

    for module, package in (("onnx", "onnx"), ("onnxruntime", "onnxruntime"),
                            ("onnxconverter_common", "onnxconverter-common")):
        if importlib.util.find_spec(module) is None:
            raise UsageError(f"ONNX models need the onnx extra: {package} is not installed "
                             "(pip install 'precisionaudit[onnx]')")


def session(model, optimize: bool = True):
    """A CPU onnxruntime session for a ModelProto (through a temporary file above 2 GiB)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.log_severity_level = 4  # fatal only: its errors reach the user as our one line
    if not optimize:
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    if model.ByteSize() < PROTO_LIMIT:
        source = model.SerializeToString()
    else:
        directory = tempfile.mkdtemp(prefix="precisionaudit-")
        atexit.register(shutil.rmtree, directory, True)  # the session may map the weights
        source = _save(model, os.path.join(directory, "model.onnx"))
    # onnxruntime prints its "EP Error ... Falling back" banner to stdout: a JSON report there
    # would not parse (the error itself reaches the user as our one line)
    with contextlib.redirect_stdout(sys.stderr):
        return ort.InferenceSession(source, options, providers=["CPUExecutionProvider"])


def with_outputs(model, names):
    """A copy of ``model`` that also returns the float tensors ``names`` (intermediates
    exposed for the range pass and check's divergence trace)."""
    import onnx

    out = onnx.ModelProto()
    out.CopyFrom(model)
    present = {o.name for o in out.graph.output}
    for name in names:
        if name not in present:
            out.graph.output.append(onnx.helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT, None))
            present.add(name)
    return out


def infer_shapes(model, path: str | None = None) -> str | None:
    """Add what onnx shape inference derives to ``model`` (in place); None, or why it failed.

    The caller reports a failure: tensors left untyped are results a scan cannot judge
    and the float16 emulation cannot round. A model of 2 GiB or more is inferred through
    a file (``path`` when it is the model's own, else a temporary copy)."""
    import onnx

    try:
        if model.ByteSize() < PROTO_LIMIT:
            model.CopyFrom(onnx.shape_inference.infer_shapes(model))
            return None
        directory = tempfile.mkdtemp(prefix="precisionaudit-")
        try:
            source = path or _save(model, os.path.join(directory, "model.onnx"))
            inferred = os.path.join(directory, "inferred.onnx")
            onnx.shape_inference.infer_shapes_path(source, inferred)
            graph = onnx.load(inferred, load_external_data=False).graph
        finally:
            shutil.rmtree(directory, ignore_errors=True)
    except Exception as exc:  # noqa: BLE001 - inference errors are the report's, not fatal
        lines = str(exc).strip().splitlines()
        return f"{type(exc).__name__}: {lines[0] if lines else ''}".rstrip(": ")
    del model.graph.value_info[:]
    model.graph.value_info.extend(graph.value_info)
    for ours, theirs in zip(model.graph.output, graph.output):
        ours.CopyFrom(theirs)
    return None


def node_named_in(message: str, model) -> tuple[str | None, str | None]:
    """(node name, op type) of the node an onnx/onnxruntime error message names."""
    names = {n.name: n.op_type for n in model.graph.node}
    for pattern in _NODE_PATTERNS:
        for match in re.finditer(pattern, message):
            if match.group(1) in names:
                return match.group(1), names[match.group(1)]
    unknown = re.search(r"(?:^|\s)([\w.]*):(\w+)\(-?\d+\) is not a registered", message)
    if unknown:  # an op onnxruntime does not know: its first node
        node = next((n for n in model.graph.node if n.op_type == unknown.group(2)
                     and n.domain in (unknown.group(1), "")), None)
        if node is not None:
            return node.name, node.op_type
    return None, None


def verify(model, what: str) -> None:
    """Raise a UsageError naming the node unless ``model`` passes onnx.checker and loads
    in onnxruntime."""
    import onnx

    try:
        if model.ByteSize() < PROTO_LIMIT:
            onnx.checker.check_model(model)
        session(model, optimize=False)
    except Exception as exc:  # noqa: BLE001 - checker and runtime errors alike
        text = str(exc).replace("\n", " ")
        detail = text.split(" : ", 3)[-1].strip() if "ONNXRuntimeError" in text else text
        name, op_type = node_named_in(text, model)
        where = f" at node {name} ({op_type})" if name else ""
        hint = (" — a Cast whose declared output type no longer matches its 'to' after the "
                "conversion" if op_type == "Cast" else "")
        raise UsageError(f"{what} does not load in onnxruntime{where}: {detail}{hint}") from exc


def write_atomic(model, path: str) -> None:
    """Write ``model`` to ``path`` through a temporary file renamed over it.

    Models of 2 GiB or more get their weights in ``<path>.data``, written first, so that a
    model file that exists always has its data."""
    directory = os.path.dirname(os.path.abspath(path))
    staging = tempfile.mkdtemp(prefix=f".{os.path.basename(path)}.", dir=directory)
    try:
        written = _save(model, os.path.join(staging, os.path.basename(path)))
        data = written + ".data"
        if os.path.exists(data):
            os.replace(data, os.path.join(directory, os.path.basename(data)))
        os.replace(written, path)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _save(model, path: str) -> str:
    import onnx

    if model.ByteSize() < PROTO_LIMIT:
        with open(path, "wb") as fh:
            fh.write(model.SerializeToString())
    else:
        onnx.save_model(model, path, save_as_external_data=True, all_tensors_to_one_file=True,
                        location=os.path.basename(path) + ".data")
        # saving moved the weights out of the proto; the caller's model keeps them
        onnx.load_external_data_for_model(model, os.path.dirname(path))
    return path
