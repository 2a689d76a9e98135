"""Calibration data (--data): batches shaped like the model's example inputs, streamed.

Sources: ``example`` (the model's example inputs, one batch), the name of a function in the
model file (or a ``module:callable``) that returns or yields batches, or a file: ``.pt`` (read with
``torch.load(weights_only=True)``), ``.safetensors`` or ``.npz``. A *list* is a list of
batches; a tuple, dict or tensor is one batch. In a flat file (safetensors, npz) keys
``"<batch>.<input>"`` (``0.input_ids``, ``1.0``) hold several batches, other keys one batch
(input names of a dict example, or positions ``0``, ``1`` of a tuple). ONNX models take
``.npz`` files (or a folder of them) keyed by graph input name.

Batches are yielded one at a time and checked against the example's structure, so a
generator over a large data set is never held in memory.
"""
from __future__ import annotations

import itertools
import os
import re
from collections.abc import Iterable, Iterator

from ..core.documents import require_regular_file
from ..core.errors import UsageError
from .sources import callable_spec

_BATCH_KEY = re.compile(r"^(\d+)\.(.+)$")


def _flat_batches(flat: dict, source: str) -> list[dict]:
    """A flat name → array mapping as a list of {input key: array} batches."""
    if not flat:
        raise UsageError(f"{source}: holds no arrays (an empty batch list)")
    numbered = {k: _BATCH_KEY.match(k) for k in flat}
    if all(numbered.values()):
        batches: dict[int, dict] = {}
        for key, m in numbered.items():
            batches.setdefault(int(m.group(1)), {})[m.group(2)] = flat[key]
        return [batches[i] for i in sorted(batches)]
    return [dict(flat)]


# --------------------------------------------------------------------------- PyTorch
def pytorch_batches(source: str, model, example, limit: int | None = None) -> Iterator[tuple[tuple, dict]]:
    """(args, kwargs) per calibration batch, at most ``limit`` of them, checked against
    ``example`` (the model's example inputs, already split into (args, kwargs)); ``model``:
    the ``ModelSource``, whose functions (a model file's, a ``module:callable``) a ``--data``
    name may call."""
    import torch.utils._pytree as pytree

    from .pytorch.model_file import call_user, split_inputs

    path = model.name
    if source == "example":
        raw: Iterable = [example]
    elif os.path.isfile(source):
        raw = _file_batches(source, example)
    elif source.isidentifier() or callable_spec(source):
        fn = model.function(source)
        if fn is None:
            raise UsageError(f"--data {source}: no function {source}() in {path} and no such file")
        raw = call_user(fn, path, source)
        raw = [raw] if _one_batch(raw) else raw
        if not isinstance(raw, Iterable):
            raise UsageError(f"--data {source}: {source}() returned {type(raw).__name__}, "
                             "not a batch or an iterable of batches")
    elif os.path.exists(source):
        require_regular_file(source, "calibration file")  # a FIFO, a device, a directory: one line, no read
    else:
        raise UsageError(f"--data {source}: no such file (and not a function name, a module:callable or "
                         "'example')")

    want = pytree.tree_structure(example)
    count = 0
    for batch in itertools.islice(raw, limit):  # never pulls a batch past the limit
        if batch is example:
            args, kwargs = example
        else:
            args, kwargs = split_inputs(batch, path, f"--data {source}")
        got = pytree.tree_structure((args, kwargs))
        if got != want or not _same_leaf_kinds((args, kwargs), example):
            raise UsageError(f"--data {source}: batch {count} does not have the structure of "
                             f"the example inputs ({_describe(args, kwargs)} vs "
                             f"{_describe(*example)})")
        count += 1
        yield args, kwargs
    if count == 0:
        raise UsageError(f"--data {source}: no batches (an empty batch list)")


def _one_batch(value) -> bool:
    import torch

    return isinstance(value, (tuple, dict, torch.Tensor))


def _same_leaf_kinds(batch, example) -> bool:
    import torch
    import torch.utils._pytree as pytree

    def kind(x):
        if isinstance(x, torch.Tensor):
            return "float" if x.is_floating_point() else "int"
        return type(x).__name__
    return [kind(x) for x in pytree.tree_leaves(batch)] == [kind(x) for x in pytree.tree_leaves(example)]


def _describe(args, kwargs) -> str:
    import torch

    def one(x):
        return f"{tuple(x.shape)}" if isinstance(x, torch.Tensor) else type(x).__name__
    parts = [one(a) for a in args] + [f"{k}={one(v)}" for k, v in kwargs.items()]
    return ", ".join(parts) or "nothing"


def _file_batches(source: str, example) -> list:
    import torch

    if source.endswith(".pt") or source.endswith(".pth"):
        try:
            data = torch.load(source, map_location="cpu", weights_only=True)
        except Exception as exc:  # noqa: BLE001 - weights_only refusals and corrupt files alike
            raise UsageError(f"--data {source}: torch.load(weights_only=True) cannot read it "
                             f"({type(exc).__name__})") from exc
        if isinstance(data, list):
            if not data:
                raise UsageError(f"--data {source}: an empty batch list")
            return data
        return [data]
    if source.endswith(".safetensors"):
        from .pytorch.weights import read_state_dict

        flat = read_state_dict(source)
    elif source.endswith(".npz"):
        flat = {k: torch.from_numpy(v) for k, v in read_npz(source).items()}
    else:
        raise UsageError(f"--data {source}: unknown data format (expected .pt, .safetensors, .npz)")
    args, kwargs = example
    batches = []
    for batch in _flat_batches(flat, source):
        if kwargs:
            batches.append(batch)
        else:
            try:
                batches.append(tuple(batch[str(i)] for i in range(len(batch))))
            except KeyError as exc:
                raise UsageError(f"--data {source}: keys {sorted(batch)} are not positions "
                                 "0, 1, ... of the example inputs") from exc
    return batches


def read_npz(path: str) -> dict:
    import numpy as np

    try:
        with np.load(path, allow_pickle=False) as data:
            return {k: data[k] for k in data.files}
    except Exception as exc:  # noqa: BLE001 - a corrupt or pickled npz is bad input
        raise UsageError(f"--data {path}: not a readable .npz file ({type(exc).__name__})") from exc


# --------------------------------------------------------------------------- ONNX
def onnx_batches(source: str, input_names: list[str], limit: int | None = None) -> Iterator[dict]:
    """{input name: numpy array} per batch from an .npz file or a folder of them."""
    if os.path.isdir(source):
        files = sorted(os.path.join(source, f) for f in os.listdir(source) if f.endswith(".npz"))
        if not files:
            raise UsageError(f"--data {source}: no .npz files in the folder")
    elif source.endswith(".npz") and os.path.exists(source):
        require_regular_file(source, "calibration file")
        files = [source]
    else:
        raise UsageError(f"--data {source}: ONNX models take an .npz file or a folder of them")
    count = 0
    for f in files:
        if limit is not None and count >= limit:
            return
        for batch in _flat_batches(read_npz(f), f):
            if limit is not None and count >= limit:
                return
            if sorted(batch) != sorted(input_names):
                raise UsageError(f"--data {f}: batch keys {sorted(batch)} are not the model's "
                                 f"inputs {sorted(input_names)}")
            count += 1
            yield batch
