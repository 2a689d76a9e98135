"""Load a Python model file: import it as pytest imports a test module, find its entry points,
call them (runtime/pytorch/source.py puts the model sources behind one interface)."""
from __future__ import annotations

import contextlib
import importlib.util
import itertools
import os
import sys

from ...core.errors import CaptureError
from ..sources import not_found_hint, package_of, put_on_path, rootdir_base
from .meta_build import empty_build, meta_error
from .user_code import describe, user_code

_counter = itertools.count()
PREFIX = "_precisionaudit_model_"


def import_model_file(path: str, pythonpath=()):
    """Import ``path`` as a fresh module, as pytest's ``prepend`` mode does: the rootdir-style
    base of the file (the first directory upwards without ``__init__.py``) first on
    ``sys.path``, then the file's own directory (as running it with ``python`` would), then
    ``pythonpath``. A file inside a package is a module of that package, so its relative
    imports work; it is registered in ``sys.modules`` while it runs (dataclasses look it up)."""
    if not os.path.isfile(path):
        raise CaptureError(f"{path}: no such file")
    package = package_of(path)
    if not all(part.isidentifier() for part in package.split(".") if package):
        package = ""  # a directory name no import can spell: the file stands alone
    name = f"{package}.{PREFIX}{next(_counter)}" if package else f"{PREFIX}{next(_counter)}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise CaptureError(f"{path}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    directories = list(dict.fromkeys([rootdir_base(path), os.path.dirname(os.path.abspath(path)), *pythonpath]))
    put_on_path(directories)
    sys.modules[name] = module
    try:
        with user_code(path, "importing the model file"):
            spec.loader.exec_module(module)
    except CaptureError:
        raise
    except SyntaxError as exc:
        where = f"{path}:{exc.lineno}" if exc.lineno else path
        raise CaptureError(f"{where}: syntax error: {exc.msg}") from exc
    except ValueError as exc:
        if "null bytes" in str(exc):  # early 3.11 releases (3.11.2) raise ValueError, not SyntaxError
            raise CaptureError(f"{path}: syntax error: {exc}") from exc
        raise CaptureError(f"{path}: importing the model file failed: {describe(exc)}") from exc
    except Exception as exc:  # noqa: BLE001 - any failure of user code is reported, not raised
        raise CaptureError(f"{path}: importing the model file failed: {describe(exc)}"
                           f"{not_found_hint(exc, directories)}") from exc
    return module


def entry_point(module, path: str, name: str, required: bool):
    fn = getattr(module, name, None)
    if fn is None:
        if required:
            raise CaptureError(f"{path}: no function {name}() (use --entry to name the model factory)")
        return None
    if not callable(fn):
        raise CaptureError(f"{path}: {name} is not callable")
    return fn


def call_user(fn, path: str, what: str):
    try:
        with user_code(path, f"{what}()"):
            return fn()
    except CaptureError:
        raise
    except Exception as exc:  # noqa: BLE001
        raise CaptureError(f"{path}: {what}() raised {describe(exc)}") from exc


def as_module(model, path: str, entry: str):
    """``model``, or a CaptureError when the factory returned something else."""
    import torch

    if not isinstance(model, torch.nn.Module):
        raise CaptureError(f"{path}: {entry}() returned {type(model).__name__}, not a torch.nn.Module")
    return model


def build_without_weights(make_model, path: str, entry: str):
    """(model, note): the model built by the factory with no weight allocated, or, when its
    constructor needs values a meta tensor does not have, built with more of them real.

    Three builds, each tried when the one before fails for want of values (its error names
    the meta device): ``meta_build.empty_build`` (parameters and every tensor of more than
    ``VALUE_LIMIT`` elements on meta, smaller ones real, so rotary tables and drop-path
    schedules keep their values and a fused-experts constructor allocates nothing);
    accelerate's ``init_empty_weights`` alone (parameters on meta: a constructor that reads a
    large tensor's values); and as written (a constructor that computes with a parameter: a
    CPU tensor meets a meta one, as in torchvision's SSDlite anchor generator), which the note
    says. Initialisers (``trunc_normal_``, transformers' ``_init_weights``) run on meta
    tensors; weight values are irrelevant to a scan. Any other error is the constructor's own
    (the scan only moved tensors to meta), raised at once and named so.
    """
    from accelerate import init_empty_weights

    why = None
    for build in (empty_build, lambda: init_empty_weights(include_buffers=False), contextlib.nullcontext):
        try:
            with build():
                model = as_module(call_user(make_model, path, entry), path, entry)
        except CaptureError as exc:
            if allocation_failure(exc):
                raise CaptureError(f"{path}: building {entry} ran out of memory ({str(exc).removeprefix(f'{path}: ')})"
                                   + (f"; without its weights allocated it failed ({why})" if why else "")) from exc
            if build is contextlib.nullcontext or not meta_error(exc):
                raise own_error(exc) from exc
            why = str(exc).removeprefix(f"{path}: ")
            continue
        if why is None:
            return model, None
        allocated = "weights" if build is contextlib.nullcontext else "large tensors"
        return model, f"built with its {allocated} allocated: without them the constructor failed ({why})"


#: what the messages of a model's own error end with
OWN_ERROR = "the model's own error, not the scan's"


#: what the message of a model that needs a package this environment lacks ends with
MISSING_PACKAGE = "a package the model imports is not installed here"


def own_error(exc: CaptureError) -> CaptureError:
    """``exc`` (the user's code raised it) said to be the model's own error, or, when the code
    could not import a package, the environment's."""
    if OWN_ERROR in str(exc) or MISSING_PACKAGE in str(exc):
        return exc
    missing = isinstance(exc.__cause__, ImportError)
    return CaptureError(f"{exc} ({MISSING_PACKAGE if missing else OWN_ERROR})")


def allocation_failure(exc: BaseException) -> bool:
    """True when building or running failed for want of memory (torch's allocator, MemoryError)."""
    while exc is not None:
        if isinstance(exc, MemoryError) or "can't allocate memory" in str(exc):
            return True
        exc = exc.__cause__
    return False


def split_inputs(example, path: str, name: str) -> tuple[tuple, dict]:
    """(args, kwargs) of what the example-inputs function returned."""
    import torch

    if isinstance(example, dict):
        return (), example
    if isinstance(example, torch.Tensor):
        return (example,), {}
    if isinstance(example, (tuple, list)):
        return tuple(example), {}
    raise CaptureError(f"{path}: {name}() returned {type(example).__name__}; "
                       "expected a tuple of tensors or a dict of keyword arguments")


def on_meta(model) -> bool:
    """True when a parameter or buffer of ``model`` has no values (the meta device)."""
    return any(t.device.type == "meta" for t in [*model.parameters(), *model.buffers()])
