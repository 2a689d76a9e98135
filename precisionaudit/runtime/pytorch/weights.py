"""Real weights for a model: read a checkpoint safely and load it into the model
(``source.ModelSource.build_loaded``).

Three formats: one ``.safetensors`` file, a directory of safetensors shards (with the
``*.safetensors.index.json`` that Hugging Face writes, or just the shards), or a PyTorch
state_dict read with ``torch.load(weights_only=True)`` (never a full unpickle: a model
file's checkpoint must not run code). A model built on ``meta`` (or with init skipped)
is materialised by ``load_state_dict(assign=True)``: the checkpoint's tensors become the
parameters, nothing is allocated twice. Every mismatch is a UsageError naming the keys.
"""
from __future__ import annotations

import json
import os
import pickle

import torch

from ...core.documents import require_regular_file
from ...core.errors import UsageError

TORCH_SUFFIXES = (".pt", ".pth", ".bin", ".ckpt")
_SHOWN = 3  # keys named in a mismatch message


def read_state_dict(path: str) -> dict[str, torch.Tensor]:
    """name → tensor of the checkpoint at ``path`` (memory-mapped where the format allows)."""
    if os.path.isdir(path):
        return _read_shards(path)
    require_regular_file(path, "checkpoint", missing="no such weights file or directory")
    if path.endswith(".safetensors"):
        return _read_safetensors(path)
    if path.endswith(TORCH_SUFFIXES):
        return _read_torch(path)
    raise UsageError(f"{path}: unknown weights format (expected .safetensors, a directory of "
                     f"safetensors shards, or a state_dict file: {', '.join(TORCH_SUFFIXES)})")


def _read_safetensors(path: str) -> dict:
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    try:
        return load_file(path)
    except (SafetensorError, OSError, ValueError, RuntimeError) as exc:
        raise UsageError(f"{path}: not a readable safetensors file ({_first_line(exc)}); "
                         "truncated or corrupt?") from exc


def _read_shards(directory: str) -> dict:
    indexes = sorted(f for f in os.listdir(directory) if f.endswith(".safetensors.index.json"))
    if indexes:
        index = os.path.join(directory, indexes[0])
        try:
            with open(index, encoding="utf-8") as fh:
                weight_map = json.load(fh)["weight_map"]
            shards = sorted(set(weight_map.values()))
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            raise UsageError(f"{index}: not a safetensors index (no weight_map)") from exc
    else:
        shards = sorted(f for f in os.listdir(directory) if f.endswith(".safetensors"))
        if not shards:
            raise UsageError(f"{directory}: no .safetensors files and no index in the directory")
    state = {}
    for shard in shards:
        shard_path = os.path.join(directory, shard)
        if not os.path.isfile(shard_path):
            raise UsageError(f"{shard_path}: shard named by the index is missing")
        state.update(_read_safetensors(shard_path))
    return state


def _read_torch(path: str) -> dict:
    try:
        data = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:
        raise UsageError(f"{path}: torch.load(weights_only=True) refuses this file (it would "
                         "run pickled code); save a plain state_dict or safetensors instead") from exc
    except (OSError, RuntimeError, EOFError, ValueError) as exc:
        raise UsageError(f"{path}: not a readable PyTorch checkpoint ({_first_line(exc)})") from exc
    if isinstance(data, dict) and not all(isinstance(v, torch.Tensor) for v in data.values()):
        nested = [k for k in ("state_dict", "model", "model_state_dict") if isinstance(data.get(k), dict)]
        data = data[nested[0]] if nested else data
    if not isinstance(data, dict) or not all(
            isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in data.items()):
        raise UsageError(f"{path}: not a state_dict (a dict of name → tensor)")
    return data


def check_fits(model: torch.nn.Module, shapes: dict, path: str) -> None:
    """Checkpoint key → shape against the model's state_dict: missing, unexpected and
    mis-shaped keys are one error (tied weights stored once count as present)."""
    expected = model.state_dict(keep_vars=True)
    shapes = dict(shapes)
    _fill_ties(shapes, _tied_aliases(model))
    missing = [k for k in expected if k not in shapes]
    unexpected = [k for k in shapes if k not in expected]
    wrong = [f"{k} {tuple(shapes[k])} vs {tuple(expected[k].shape)}" for k in expected
             if k in shapes and tuple(shapes[k]) != tuple(expected[k].shape)]
    problems = [(what, keys) for what, keys in (("missing", missing), ("unexpected", unexpected),
                                                ("shape mismatch", wrong)) if keys]
    if problems:
        detail = "; ".join(f"{what}: {_some(keys)}" for what, keys in problems)
        raise UsageError(f"{path}: the weights do not fit the model ({detail})")


def load_weights(model: torch.nn.Module, state: dict, path: str) -> torch.nn.Module:
    """Load ``state`` into ``model`` (meta or real) by assignment; mismatches are errors."""
    check_fits(model, {k: tuple(v.shape) for k, v in state.items()}, path)
    state = dict(state)
    ties = _tied_aliases(model)
    _fill_ties(state, ties)
    model.load_state_dict(state, strict=True, assign=True)
    for alias, source in ties.items():  # assign=True unties them: share the first one again
        owner, _, attr = alias.rpartition(".")
        setattr(model.get_submodule(owner), attr, model.get_parameter(source))
    left = [n for n, t in [*model.named_parameters(), *model.named_buffers()] if t.device.type == "meta"]
    if left:
        raise UsageError(f"{path}: after loading, {_some(left)} still on the meta device "
                         "(a non-persistent buffer the model must compute itself)")
    return model


def _fill_ties(stored: dict, ties: dict) -> None:
    """safetensors stores tied weights once, under either name (``save_model`` may keep the
    alias, e.g. ``head.weight``, and drop the first name): fill in the other one."""
    for alias, source in ties.items():
        if alias not in stored and source in stored:
            stored[alias] = stored[source]
        elif source not in stored and alias in stored:
            stored[source] = stored[alias]


def _tied_aliases(model) -> dict[str, str]:
    """Parameter names that share a tensor with an earlier name: alias → first name."""
    first, aliases = {}, {}
    for name, p in model.named_parameters(remove_duplicate=False):
        if id(p) in first:
            aliases[name] = first[id(p)]
        else:
            first[id(p)] = name
    return aliases


def _some(keys) -> str:
    shown = ", ".join(keys[:_SHOWN])
    return shown + (f" and {len(keys) - _SHOWN} more" if len(keys) > _SHOWN else "")


def _first_line(exc) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__
