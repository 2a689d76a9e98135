"""What the user named as a model, and how its code is found: torch-free, decided before any
model code runs. The child that runs the model opens it (``runtime/pytorch/source.py``).

Three kinds of PyTorch model sources besides a model file:

- a Hugging Face directory (``config.json``, optionally ``*.safetensors`` shards), or the
  path of such a ``config.json``: the model is built from the architecture the config names;
- ``module:callable`` (``torchvision.models:resnet50``, ``mypkg.models:build``), as uvicorn
  and gunicorn name an app: the callable returns the model.

Imports follow pytest and uvicorn. A model file is imported with the rootdir-style base of
the file on ``sys.path`` (the first directory upwards without ``__init__.py``: pytest's
``prepend`` import mode), so a model inside its own package imports that package wherever
the command is run from; a ``module:callable`` with the working directory on ``sys.path``
(uvicorn's ``--app-dir .``). ``--pythonpath DIR`` and the settings' ``pythonpath`` add
directories to both (pytest's ``pythonpath`` setting).
"""
from __future__ import annotations

import contextlib
import json
import os
import re
import site
import sys
import sysconfig
from dataclasses import dataclass, replace

from ..core.errors import UsageError

#: the file that makes a directory a Hugging Face model directory
HF_CONFIG = "config.json"
#: ``--weights`` given without a path: the weights beside the model (a Hugging Face directory's shards)
BESIDE = "<beside the model>"
_DOTTED = r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*"
_CALLABLE_SPEC = re.compile(rf"({_DOTTED}):({_DOTTED})")


@dataclass(frozen=True)
class LoadOptions:
    """How a named model is loaded: its factory and example-inputs functions (a model
    file's, or ``module:callable`` specs), generated input shapes, and the directories its
    imports are searched in besides the usual ones."""

    entry: str = "get_model"
    inputs: str = "get_example_inputs"
    input_shapes: tuple[str, ...] = ()  # NAME=DIMS or DIMS, as --input-shape takes them
    pythonpath: tuple[str, ...] = ()  # absolute directories

    def searching(self, directories) -> LoadOptions:
        """These options with ``directories`` searched too, after the ones they have."""
        more = tuple(os.path.abspath(d) for d in directories)
        return replace(self, pythonpath=tuple(dict.fromkeys(self.pythonpath + more)))


DEFAULT_LOAD = LoadOptions()


def callable_spec(text: str) -> tuple[str, str] | None:
    """(module, attribute) of a ``module:callable`` spec; None for anything else."""
    match = _CALLABLE_SPEC.fullmatch(text)
    return (match.group(1), match.group(2)) if match else None


def source_kind(name: str) -> str | None:
    """``"huggingface"`` for a directory holding config.json, or a config.json that names a
    ``model_type`` or ``architectures`` (other tools write files of that name too: a pre-commit
    hook hands them over); ``"callable"`` for a ``module:callable`` spec that names no file;
    None otherwise (a file, whose kind its suffix tells: ``frontend_for``)."""
    if os.path.isdir(name):
        return "huggingface" if os.path.isfile(os.path.join(name, HF_CONFIG)) else None
    if os.path.basename(name) == HF_CONFIG and os.path.isfile(name):
        return "huggingface" if _names_a_model(name) else None
    if not os.path.exists(name) and callable_spec(name):
        return "callable"
    return None


def _names_a_model(path: str) -> bool:
    try:
        with open(path, encoding="utf-8") as fh:
            config = json.load(fh)
    except (OSError, ValueError):
        return False
    return isinstance(config, dict) and ("model_type" in config or "architectures" in config)


def hf_config_path(name: str) -> str:
    return os.path.join(name, HF_CONFIG) if os.path.isdir(name) else name


def read_hf_config(name: str) -> dict:
    """The config of a Hugging Face directory (or config.json), checked for what building a
    model needs before anything is imported: a ``model_type``, and ``architectures`` as a list
    of class names."""
    path = hf_config_path(name)
    try:
        with open(path, encoding="utf-8") as fh:
            config = json.load(fh)
    except FileNotFoundError:
        raise UsageError(f"{name}: no such file or directory") from None
    except OSError as exc:
        raise UsageError(f"{path}: cannot read: {exc.strerror}") from exc
    except ValueError as exc:
        raise UsageError(f"{path}: not a JSON config ({exc})") from exc
    if not isinstance(config, dict):
        raise UsageError(f"{path}: not a Hugging Face config (a JSON object)")
    if not isinstance(config.get("model_type"), str) or not config["model_type"]:
        raise UsageError(f"{path}: no model_type: not a Hugging Face model config (transformers "
                         "builds a model from its model_type and architectures)")
    architectures = config.get("architectures")
    if architectures is not None and not (isinstance(architectures, list) and architectures
                                          and all(isinstance(a, str) for a in architectures)):
        raise UsageError(f"{path}: architectures must be a list of class names, got {architectures!r}")
    return config


def weights_beside(name: str) -> str | None:
    """The directory of a Hugging Face model's safetensors shards, when it has any."""
    if source_kind(name) != "huggingface":
        return None
    directory = os.path.dirname(hf_config_path(name)) or os.curdir
    return directory if any(f.endswith(".safetensors") for f in os.listdir(directory)) else None


def resolve_weights(name: str, weights: str | None) -> str | None:
    """``--weights`` for the model ``name``: the path given, or, given without one, the
    safetensors shards beside the model (a UsageError when there are none)."""
    if weights != BESIDE:
        return weights
    found = weights_beside(name)
    if found is None:
        what = "holds no .safetensors shards" if source_kind(name) == "huggingface" else \
            "is no Hugging Face directory"
        raise UsageError(f"{name}: --weights without a path reads the safetensors shards of a Hugging "
                         f"Face directory, and {name} {what}; name the weights file")
    return found


def entry_label(name: str, load: LoadOptions) -> str:
    """What a report names as the model's entry: the factory of a model file, the callable of
    a spec, the architecture a Hugging Face config names."""
    kind = source_kind(name)
    if kind == "callable":
        return callable_spec(name)[1]
    if kind == "huggingface":
        try:
            config = read_hf_config(name)
        except UsageError:
            return "config.json"
        return (config.get("architectures") or [config["model_type"]])[0]
    return load.entry


# --------------------------------------------------------------------------- imports
def rootdir_base(path: str) -> str:
    """The first directory upwards from the file that has no ``__init__.py`` (pytest's
    rootdir-based insertion): a file in ``repo/mypkg/models/`` of a regular package
    ``mypkg`` imports as ``mypkg.models.x`` with ``repo`` on the path."""
    directory = os.path.dirname(os.path.abspath(path))
    while os.path.isfile(os.path.join(directory, "__init__.py")):
        parent = os.path.dirname(directory)
        if parent == directory:
            break
        directory = parent
    return directory


def package_of(path: str) -> str:
    """The dotted package the file sits in, below its rootdir-style base ('' for none)."""
    directory = os.path.dirname(os.path.abspath(path))
    return os.path.relpath(directory, rootdir_base(path)).replace(os.sep, ".").strip(".")


def search_path(path: str | None, load: LoadOptions) -> list[str]:
    """The directories imports search first: a model file's rootdir-style base, or for a
    ``module:callable`` the working directory; then ``--pythonpath`` and the settings'."""
    first = rootdir_base(path) if path is not None else os.getcwd()
    return list(dict.fromkeys([first, *load.pythonpath]))


def put_on_path(directories) -> None:
    """``directories`` at the front of ``sys.path``, in order (as pytest's prepend mode)."""
    import importlib

    for directory in reversed(directories):
        if directory in sys.path:
            sys.path.remove(directory)
        sys.path.insert(0, directory)
    importlib.invalidate_caches()  # a file written since the last import must be found


def not_found_hint(exc: BaseException, directories) -> str:
    """For a ModuleNotFoundError: where the import looked, and how to add a directory."""
    if not isinstance(exc, ModuleNotFoundError):
        return ""
    return (f" (searched {', '.join(directories)} and the installed packages; add the directory that "
            "holds it with --pythonpath DIR)")


def _library_folders() -> tuple[str, ...]:
    return tuple({os.path.join(os.path.realpath(p), "") for p in (
        *site.getsitepackages(), site.getusersitepackages(),
        *(sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib", "purelib", "platlib")))})


def _location(module) -> str | None:
    where = getattr(module, "__file__", None) or next(iter(getattr(module, "__path__", None) or ()), None)
    return os.path.realpath(where) if where else None


@contextlib.contextmanager
def imports_kept():
    """``sys.path`` put back after the block, and the modules it imported from the directories
    it put there (the model file, its package) forgotten, so that a model of another project
    run next in the same process (the Python API, the tests) imports its own ``mypkg``.
    Installed libraries and precisionaudit's own modules stay."""
    path, before = list(sys.path), set(sys.modules)
    try:
        yield
    finally:
        added = tuple(os.path.join(os.path.realpath(d), "") for d in sys.path if d not in path)
        sys.path[:] = path
        library = _library_folders()
        for name in set(sys.modules) - before:
            where = _location(sys.modules.get(name))
            if (where and where.startswith(added) and not where.startswith(library)
                    and name.split(".")[0] != "precisionaudit"):
                del sys.modules[name]
