"""Frontends: one per kind of input file, and the one place that picks the frontends of a path.

Every command asks ``frontend_for(path)`` (the model frontend: plan, check, explain, convert)
or ``scan_frontends`` (every frontend that scans the file) and calls what it gets
(``base.Frontend``); nothing else in the package branches on a file's kind. A new kind of
input is a module here and its place in ``SUFFIXES``. A Hugging Face directory (or its
config.json) and a ``module:callable`` are PyTorch models whatever their suffix
(runtime/sources.py's ``source_kind``).
"""
from __future__ import annotations

from ..core.errors import UsageError
from ..runtime.sources import source_kind
from .base import CheckRequest, Frontend, ModelFrontend, PlanOutcome, PlanRequest
from .keras import KerasFrontend
from .onnx import OnnxFrontend
from .python_file import read_python
from .pytorch import PyTorchFrontend
from .training import TrainingFrontend
from .watch import WatchFrontend

__all__ = ["CheckRequest", "Frontend", "ModelFrontend", "PlanOutcome", "PlanRequest", "frontend_for",
           "is_model_file", "not_scanned", "scan_frontends", "MODELS", "SUFFIXES", "WATCH"]

PYTORCH, ONNX, TRAINING, KERAS = PyTorchFrontend(), OnnxFrontend(), TrainingFrontend(), KerasFrontend()
TRAINING_CONFIG = TrainingFrontend(configs=True)
#: a precisionaudit.watch log directory (events-rank*.jsonl): plan reads its findings
WATCH = WatchFrontend()
#: the model frontend of each suffix: what plan, check, explain and convert call (a file of
#: another suffix is taken as a PyTorch model file, whose import then says what is wrong)
MODELS: dict[str, ModelFrontend] = {".py": PYTORCH, ".onnx": ONNX, ".keras": KERAS}
#: the suffixes a scan looks at (a directory yields their files) and the frontends it asks,
#: in order, whether they scan such a file (``takes``). DeepSpeed JSON and accelerate YAML
#: configs are training files too (other JSON/YAML: no frontend takes them).
#: A Python model file that imports keras goes to KERAS instead of PYTORCH (``_python_model``).
SUFFIXES: dict[str, tuple] = {".py": (PYTORCH, TRAINING), ".onnx": (ONNX,), ".keras": (KERAS,),
                              ".json": (TRAINING_CONFIG,), ".yaml": (TRAINING_CONFIG,), ".yml": (TRAINING_CONFIG,)}


def _suffix(path: str, table) -> str | None:
    return next((suffix for suffix in table if path.endswith(suffix)), None)


def frontend_for(path: str, entry: str | None = "get_model") -> ModelFrontend:
    """The model frontend of what is named to plan, check, explain or convert (a watch log
    directory is the watch log's frontend); the frontend's UsageError when it is no model of
    that kind (a Python file whose ``get_model`` needs arguments is not imported). ``entry``
    None: the kind alone (convert, which only the ONNX frontend does, says so to any other)."""
    frontend = _model_frontend(path)
    if entry is not None and not frontend.accepts(path, entry):
        raise frontend.not_taken(path, entry)
    return frontend


def _model_frontend(path: str) -> ModelFrontend:
    if WATCH.is_log(path):
        return WATCH
    if _named_model(path):
        return PYTORCH
    suffix = _suffix(path, MODELS)
    return _python_model(path, MODELS[suffix] if suffix else PYTORCH)


def _named_model(path: str) -> bool:
    """A PyTorch model named without a model file (runtime/sources.py): a Hugging Face
    directory or config.json, or a module:callable."""
    return source_kind(path) is not None


def _python_model(path: str, frontend):
    """A Python model file that imports keras is a Keras model file (read, never imported)."""
    return KERAS if frontend is PYTORCH and _imports_keras(path) else frontend


def _imports_keras(path: str) -> bool:
    try:
        return read_python(path).imports_keras
    except UsageError:
        return False  # the PyTorch frontend reports the unreadable file


def not_scanned(path: str, entry: str):
    """The UsageError for a file named to scan that no frontend takes."""
    suffix = _suffix(path, MODELS)
    if suffix is None and _suffix(path, SUFFIXES):
        return UsageError(f"{path}: not a DeepSpeed or accelerate config (or no training rule is selected)")
    if suffix is None:
        return UsageError(f"{path}: not a Python model file, an .onnx file or a training config")
    return _model_frontend(path).not_taken(path, entry)


def scan_frontends(path: str, entry: str, rules) -> list:
    """The frontends that scan ``path`` with the rules selected for it (``rules``: the
    catalog's, read without their checks): a model file's (an ONNX file; a Python file that
    defines ``entry``) and, when training rules are selected, a Python file's training audit.
    Read from the source, never imported; empty when nothing applies."""
    suffix = _suffix(path, SUFFIXES)
    if _named_model(path):
        frontends = [PYTORCH]
    else:
        frontends = [_python_model(path, f) for f in SUFFIXES[suffix]] if suffix else []
    return [f for f in frontends if f.takes(path, entry, rules)]


def is_model_file(path: str, entry: str = "get_model") -> bool:
    """Whether a scan takes ``path`` as a model file, read from its source (never imported):
    an ONNX file always, a Python file when it defines the entry point."""
    return _model_frontend(path).accepts(path, entry)
