"""Keras 3 model files: capture a ``keras.Model`` on the torch backend, under its own policies.

A Keras model under a ``mixed_float16`` policy needs no autocast: each layer casts its
inputs and variables to its policy's compute dtype itself (``Layer.__call__``'s autocast
scope, ``ops.cast``), and on the torch backend those casts and the ops after them are
torch ops. So the forward is recorded as written (pure mode: every op judged in the dtype
it really has), with no autocast emulation on top.

Keras's torch backend branches on its device: on CPU it computes float16 matmuls and
softmax in float32 (``numpy.matmul``, ``nn.softmax``: "doesn't support float16 using
cpu"), on CUDA it does not. The forward therefore runs on fake CPU tensors (fake CUDA
tensors cannot run ``contiguous`` without a CUDA build) through ``stateless_call`` with fake
variables, while Keras's ``get_device()`` answers the target device (CUDA unless
``--device cpu``) to its dtype branches: torch's ops give the same dtypes on either device,
so the captured dtypes are those of the CUDA path. No weight is read and no GPU is needed.

A Dense layer's ``ops.matmul(inputs, kernel)`` is recorded as ``linear`` with the kernel as
its parameter in torch's (out, in) order: it is the projection ``nn.Linear`` is, and the
rules tell projections from activation products (attention logits) by that name.
"""
from __future__ import annotations

import contextlib
from collections import Counter

from ...core.errors import CaptureError
from ...core.numerics import LOW_PRECISION_NAMES
from ...core.target import Target
from ...ir.capture import Capture
from ...runtime.pytorch.model_file import call_user
from ...runtime.pytorch.source import open_source
from ...runtime.pytorch.user_code import describe, user_code
from ...runtime.sources import DEFAULT_LOAD, LoadOptions
from ..pytorch.capture import build_graph
from ..pytorch.recorder import Recorder, calls_the_model, skip_frames_in
from .backend import import_keras, require_torch_backend

#: what a scan's notes say about verdicts that depend on a kernel
KERNEL_NOTE = ("kernel verdicts (accumulation in softmax, norms, reductions) describe Keras's torch backend "
               "and PyTorch's {device} kernels, not TensorFlow's or XLA's")


def capture_file(path: str, target: Target, load: LoadOptions = DEFAULT_LOAD) -> Capture:
    """The IR of the Keras model file at ``path``, judged under its layers' dtype policies."""
    keras = import_keras()
    skip_frames_in(keras)
    filtering = keras.config.is_traceback_filtering_enabled()
    keras.config.disable_traceback_filtering()  # its frames name an op the backend cannot run
    try:
        return _capture(keras, path, target, load)
    finally:
        if filtering:
            keras.config.enable_traceback_filtering()


def model_and_inputs(keras, path: str, load: LoadOptions = DEFAULT_LOAD):
    """(keras model, example inputs) of a Keras model file or ``.keras`` archive."""
    if path.endswith(ARCHIVE_SUFFIX):
        model = load_archive(keras, path)
        return model, archive_inputs(model, path)
    return _from_model_file(keras, path, load)


def _capture(keras, path, target, load) -> Capture:
    model, example = model_and_inputs(keras, path, load)
    layers = layer_facts(model)
    judged = policy_target(layers, target)
    try:
        graph, kind = _record(keras, model, example, judged, path, fake=True), "fake"
        notes = []
    except CaptureError:
        raise
    except Exception as exc:  # noqa: BLE001 - Keras code that needs values: run it for real, on CPU
        if _unsupported_op(exc):
            raise _forward_error(exc, path) from exc
        fake_error = exc
        try:
            graph, kind = _record(keras, model, example, judged, path, fake=False), "eager"
        except CaptureError:
            raise
        except Exception as exc:  # noqa: BLE001
            raise _forward_error(exc, path) from exc
        notes = [f"fake-tensor capture failed ({describe(fake_error)}); ran eagerly on CPU, where Keras's torch "
                 "backend computes float16 matmul and softmax in float32 (on CUDA it does not)"]
    graph.graph["keras_layers"] = layers
    notes.append(policy_note(layers))
    notes.append(KERNEL_NOTE.format(device="CUDA" if judged.device == "cuda" and kind == "fake" else "CPU"))
    return Capture(graph, kind, notes=notes)


def _from_model_file(keras, path, load):
    """(model, example inputs) of a Keras model file."""
    try:
        source = open_source(path, load)
    except CaptureError as exc:
        if "No module named 'tensorflow'" in str(exc):
            raise CaptureError(f"{path}: the model file imports TensorFlow, which precisionaudit does not run: "
                               f"{TF_ROUTE}") from exc
        raise
    require_torch_backend(path)
    try:
        model = call_user(source.make_model, path, source.entry)
    except CaptureError as exc:  # a functional model calls its layers while it is built
        raise (_forward_error(exc, path) if _unsupported_op(exc) else exc) from exc
    if not isinstance(model, keras.Layer):
        raise CaptureError(f"{path}: {source.entry}() returned {type(model).__name__}, not a keras.Model")
    if not source.has_inputs:
        raise CaptureError(f"{path}: a Keras model needs example inputs ({source.missing_inputs})")
    return model, call_user(source.make_inputs, path, source.inputs)


#: what a model that needs TensorFlow can do instead
TF_ROUTE = ("Keras models run on Keras's torch backend here; a model that needs TensorFlow's ops can be "
            "exported to ONNX with tf2onnx and scanned as an .onnx file")
ARCHIVE_SUFFIX = ".keras"


def load_archive(keras, path: str):
    """The model of a ``.keras`` archive (a zip of config.json, metadata.json and the
    weights), loaded without compiling and in Keras's safe mode (no lambda is deserialised);
    a CaptureError for a file that is not one, or that a newer Keras wrote."""
    import json
    import os
    import zipfile

    from packaging.version import InvalidVersion, Version

    if not os.path.isfile(path):
        raise CaptureError(f"{path}: no such file")
    if not zipfile.is_zipfile(path):
        raise CaptureError(f"{path}: not a Keras archive (a .keras file is a zip archive; this one is not)")
    try:
        with zipfile.ZipFile(path) as archive:
            metadata = json.loads(archive.read("metadata.json")) if "metadata.json" in archive.namelist() else {}
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        raise CaptureError(f"{path}: not a readable Keras archive ({describe(exc)})") from exc
    written = str(metadata.get("keras_version", "")) if isinstance(metadata, dict) else ""
    try:
        newer = bool(written) and Version(written) > Version(keras.__version__)
    except InvalidVersion:
        newer = False
    if newer:
        raise CaptureError(f"{path}: written by Keras {written}, newer than the installed Keras "
                           f"{keras.__version__} (upgrade keras to read it)")
    try:
        with user_code(path, "loading the archive"):
            return keras.saving.load_model(path, compile=False, safe_mode=True)
    except CaptureError:
        raise
    except Exception as exc:  # noqa: BLE001 - a damaged archive, a custom layer Keras does not know
        raise CaptureError(f"{path}: Keras could not load the archive: {describe(exc)}") from exc


def archive_inputs(model, path: str) -> tuple:
    """Zeros shaped like the model's inputs (a batch of 1; another unknown dim: 8)."""
    import numpy as np

    specs = getattr(model, "inputs", None)
    if not specs:
        raise CaptureError(f"{path}: the archive's model declares no inputs (a subclassed model): "
                           "scan a model file whose get_example_inputs() gives them")
    return tuple(np.zeros([1 if i == 0 and d is None else (8 if d is None else d) for i, d in enumerate(t.shape)],
                          dtype=t.dtype) for t in specs)


def layer_facts(model) -> dict:
    """Each layer's path (``block.dense``; the model is "") → its class, dtype policy, the
    dtypes that policy computes and keeps variables in, and whether it is one of Keras's own."""
    facts = {}
    for path, layer in layer_paths(model).values():
        policy = layer.dtype_policy
        facts[path] = {"type": type(layer).__name__, "policy": policy.name,
                       "compute_dtype": policy.compute_dtype, "variable_dtype": policy.variable_dtype,
                       # Keras's own layers cast on purpose; a custom layer's casts are the user's
                       "builtin": type(layer).__module__.split(".")[0] == "keras"}
    return facts


def layer_paths(model) -> dict:
    """id(layer) → (path, layer) for the model and every layer under it; a path joins the
    layer names from the model down with dots (a shared layer keeps its first path)."""
    found = {id(model): ("", model)}
    stack = [("", model)]
    while stack:
        prefix, layer = stack.pop()
        for child in layer._flatten_layers(include_self=False, recursive=False):
            if id(child) not in found:
                path = f"{prefix}.{child.name}" if prefix else child.name
                found[id(child)] = (path, child)
                stack.append((path, child))
    return found


def policy_target(layers: dict, target: Target) -> Target:
    """The target the model is judged under: its own low compute dtype (the one most layers
    use), in pure mode (its ops are judged in the dtypes they have), on the device asked for."""
    low = Counter(f["compute_dtype"] for f in layers.values() if f["compute_dtype"] in LOW_PRECISION_NAMES)
    dtype = low.most_common(1)[0][0] if low else target.dtype
    return Target(dtype, "pure", target.device)


def policy_note(layers: dict) -> str:
    counts = Counter(f["policy"] for f in layers.values())
    return "Keras dtype policies: " + ", ".join(f"{name} ({n} layer{'s' if n != 1 else ''})"
                                                for name, n in counts.most_common())


@calls_the_model
def _record(keras, model, example, target: Target, path: str, fake: bool):
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode

    device = "cpu"
    mode = FakeTensorMode(allow_non_fake_inputs=True) if fake else contextlib.nullcontext()
    args, kwargs = _split(example, path)
    if not model.built:  # a subclassed model makes its variables on its first call
        with user_code(path, "forward"), torch.no_grad():
            model(*_tensors(args, "cpu"), **_tensors(kwargs, "cpu"))
    variables = [*model.trainable_variables, *model.non_trainable_variables]
    with mode, keras_device(target.device if fake else "cpu"):
        values = [torch.empty(tuple(v.shape), dtype=v.value.dtype, device=device) if fake else v.value
                  for v in variables]
        args, kwargs = _tensors(args, device, fake), _tensors(kwargs, device, fake)
        recorder = Recorder(model, {v.path: t for v, t in zip(variables, values)})
        recorder.module_names = {key: path for key, (path, _) in layer_paths(model).items()}
        recorder.mark_inputs((args, kwargs))
        trainable = values[:len(model.trainable_variables)]
        with torch.no_grad(), recorder, user_code(path, "forward"):
            out, _ = model.stateless_call(trainable, values[len(trainable):], *args, training=False, **kwargs)
    graph = build_graph(recorder, target, (args, kwargs), out, model)
    dense_matmuls_as_linear(graph)
    return graph


class _DeviceName(str):
    """The CPU device to torch ("cpu"), and ``device`` to Keras's ``get_device() == ...``
    branches: Keras then takes its CUDA dtype paths while the tensors stay on the CPU."""

    def __new__(cls, device: str):
        name = str.__new__(cls, "cpu")
        name.device = device
        return name

    def __eq__(self, other):
        import torch

        if isinstance(other, torch.device):
            return other.type == "cpu"  # convert_to_tensor's "x.device != device": no move
        return str.__eq__(other, self.device) if isinstance(other, str) else NotImplemented

    def __ne__(self, other):
        equal = self.__eq__(other)
        return equal if equal is NotImplemented else not equal

    __hash__ = str.__hash__


@contextlib.contextmanager
def keras_device(device: str):
    """Keras's torch backend believes it runs on ``device`` (``keras.device`` would also move
    every tensor there)."""
    from keras.src.backend.common import global_state

    previous = global_state.get_global_attribute("torch_device", None)
    global_state.set_global_attribute("torch_device", _DeviceName(device))
    try:
        yield
    finally:
        global_state.set_global_attribute("torch_device", previous)


def dense_matmuls_as_linear(graph) -> None:
    """A matmul whose right operand is a 2-D variable (a Dense kernel, read directly or through
    the policy's cast) becomes ``linear`` with that kernel as (out_features, in_features)."""
    from ...ir.graph import producers

    for name, node in graph.nodes(data=True):
        if node["op"] != "matmul" or len(node["in_shapes"]) != 2:
            continue
        kernel = [p for p in node["params"] if p[1] and len(p[1]) == 2]
        preds = producers(graph, name)
        if not kernel and len(preds) == 2 and graph.edges[preds[1], name].get("arg") == 1:
            kernel = _cast_variable(graph, preds[1])
        if len(kernel) == 1 and tuple(kernel[0][1]) == tuple(node["in_shapes"][1]):
            (param, (k, n)), = kernel
            node["op"], node["params"] = "linear", [[param, (n, k)]]


def _split(example, path: str) -> tuple[tuple, dict]:
    if isinstance(example, dict):
        return (), dict(example)
    if isinstance(example, (tuple, list)):
        return tuple(example), {}
    return (example,), {}


def _tensors(tree, device: str, fake: bool = False):
    """numpy arrays and tensors of the example inputs as torch tensors on ``device`` (fake
    ones inside a FakeTensorMode: a real tensor cannot move to a device the build lacks)."""
    import numpy as np
    import torch
    from torch.utils import _pytree as pytree

    def convert(x):
        if isinstance(x, np.ndarray):
            x = torch.from_numpy(x)
        if not isinstance(x, torch.Tensor):
            return x
        return torch.empty(tuple(x.shape), dtype=x.dtype, device=device) if fake else x.to(device)
    return pytree.tree_map(convert, tree)


def _unsupported_op(exc: BaseException) -> tuple | None:
    """(the keras.ops function whose torch implementation refused to run, its error): a
    NotImplementedError raised inside keras/src/backend/torch; None for other errors."""
    import os
    import traceback

    backend = os.sep + os.path.join("keras", "src", "backend", "torch") + os.sep
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, NotImplementedError):
            frames = [f for f in traceback.extract_tb(exc.__traceback__) if backend in f.filename]
            if frames:
                return frames[-1].name, exc
        exc = exc.__cause__ or exc.__context__
    return None


def _forward_error(exc: BaseException, path: str) -> CaptureError:
    unsupported = _unsupported_op(exc)
    if unsupported is not None:
        op, error = unsupported
        return CaptureError(f"{path}: the model calls keras.ops.{op}, which Keras's torch backend cannot run "
                            f"({describe(error)}); {TF_ROUTE}")
    return CaptureError(f"{path}: the forward failed on the example inputs: {describe(exc)}")


def _cast_variable(graph, name: str) -> list:
    """The 2-D variable a chain of casts reads (the policy's cast, and on CPU Keras's cast of
    a float16 operand back to float32), or []."""
    for _ in range(4):
        cast = graph.nodes[name]
        if not cast["explicit_cast"]:
            return []
        preds = list(graph.predecessors(name))
        if not preds:
            return [p for p in cast["params"] if p[1] and len(p[1]) == 2]
        if len(preds) != 1:
            return []
        name = preds[0]
    return []
