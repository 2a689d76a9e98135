"""Checkpoints larger than memory: accelerate builds the model empty and dispatches it.

When a safetensors checkpoint (``--weights``) is larger than half of the memory available,
the range pass does not load it whole: the model is built with no tensor allocated
(``meta_build.empty_build``: accelerate's ``init_empty_weights``, large factory tensors on
meta) and loaded with ``load_checkpoint_and_dispatch(device_map="auto", max_memory=...,
offload_folder=...)``. The layers that do not fit the memory budget are
written to an offload folder and accelerate's hooks bring each one in while the forward
runs it, so the range pass goes layer by layer in bounded memory. Where GPUs are present,
``device_map="auto"`` places layers on them first (all of them: a model split over several
GPUs), then in CPU memory, then on disk. The weights' own statistics (PA303) are read
tensor by tensor from the checkpoint. No loader or scheduler of ours: accelerate's.
"""
from __future__ import annotations

import atexit
import os
import shutil
import tempfile

import torch

from ...core.errors import UsageError
from ...runtime.pytorch.meta_build import empty_build
from ...runtime.pytorch.weights import check_fits

#: a checkpoint larger than this share of the available memory is dispatched with offload
OFFLOAD_SHARE = 0.5


def available_memory() -> int:
    try:
        import psutil
    except ImportError:  # without psutil (the offload extra): what the kernel says is free
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    return psutil.virtual_memory().available


def safetensors_files(weights: str) -> list[str]:
    if os.path.isdir(weights):
        return sorted(os.path.join(weights, f) for f in os.listdir(weights) if f.endswith(".safetensors"))
    return [weights] if weights.endswith(".safetensors") and os.path.isfile(weights) else []


def needs_offload(weights: str | None) -> bool:
    """Whether ``weights`` (safetensors only) is larger than OFFLOAD_SHARE of free memory."""
    files = safetensors_files(weights) if weights else []
    return bool(files) and sum(os.path.getsize(f) for f in files) > OFFLOAD_SHARE * available_memory()


def _tensors(weights: str):
    """(name, tensor) of every tensor in the checkpoint, read one at a time."""
    from safetensors import safe_open

    for f in safetensors_files(weights):
        with safe_open(f, framework="pt") as fh:
            for name in fh.keys():
                yield name, fh.get_tensor(name)


def checkpoint_shapes(weights: str) -> dict:
    from safetensors import safe_open

    shapes = {}
    for f in safetensors_files(weights):
        with safe_open(f, framework="pt") as fh:
            shapes.update({name: tuple(fh.get_slice(name).get_shape()) for name in fh.keys()})
    return shapes


def checkpoint_stats(weights: str, stats) -> dict:
    """name → ``stats(tensor)`` of every floating-point tensor, one tensor in memory at a time."""
    return {name: stats(t) for name, t in _tensors(weights) if t.is_floating_point() and t.numel()}


def _retie(model) -> None:
    """``init_empty_weights`` wraps each registered parameter in a new Parameter over the same
    meta storage, which unties weights tied by assignment (``head.weight = tok.weight``):
    parameters over one storage and view become one Parameter again."""
    first = {}
    for module in model.modules():
        for name, p in list(module._parameters.items()):
            if p is None or p.device.type != "meta":
                continue
            key = (p.untyped_storage()._cdata, p.storage_offset(), tuple(p.shape), tuple(p.stride()), p.dtype)
            kept = first.setdefault(key, (p, p))[1]  # the tensor stays referenced: keys stay unique
            if kept is not p:
                module._parameters[name] = kept


def load_offloaded(source, weights: str, budget: int | None = None):
    """The model of ``source`` (a ``runtime.pytorch.source.ModelSource``) dispatched by
    accelerate: GPUs, then ``budget`` bytes of CPU memory (default: OFFLOAD_SHARE of what is
    free), then disk."""
    try:
        from accelerate import infer_auto_device_map, load_checkpoint_and_dispatch
        from accelerate.utils import get_max_memory
    except ImportError as exc:
        raise UsageError(f"{weights}: larger than half the free memory; profiling it needs "
                         "accelerate for disk offload (pip install 'precisionaudit[offload]')") from exc
    folder = tempfile.mkdtemp(prefix="precisionaudit-offload-")
    atexit.register(shutil.rmtree, folder, True)
    max_memory = get_max_memory()
    max_memory["cpu"] = int(budget if budget is not None else OFFLOAD_SHARE * available_memory())
    own = source.load_own(weights, device_map="auto", max_memory=max_memory, offload_folder=folder)
    if own is not None:  # a Hugging Face directory's shards: transformers dispatches them itself
        return own
    with empty_build(include_buffers=True):  # no tensor allocated: the checkpoint fills them
        model = source.build()
    _retie(model)
    check_fits(model, checkpoint_shapes(weights), weights)
    device_map = infer_auto_device_map(model, max_memory=max_memory)
    if set(device_map.values()) == {"disk"}:
        raise UsageError(f"{weights}: not enough free memory to hold even its largest layer "
                         f"({max_memory['cpu'] / 2**20:.0f} MiB available to the range pass)")
    model = load_checkpoint_and_dispatch(model, weights, device_map=device_map,
                                         offload_folder=folder, dtype=torch.float32)
    return model.eval()
