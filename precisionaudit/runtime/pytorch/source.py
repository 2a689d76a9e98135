"""The PyTorch model sources behind one interface: a model file, a Hugging Face directory, a
``module:callable``. Capture, the range pass, check and prune ask ``open_source`` for the
model and its example inputs, whatever the user named (runtime/sources.py tells which).

A source builds the model by calling the user's code (the factory, the Auto class, the
callable) through ``call_user``, so that what it prints, raises or exits with is reported
as the model's; errors name the model as the user typed it.
"""
from __future__ import annotations

import importlib
import os

from ...core.errors import CaptureError, UsageError
from ..sources import LoadOptions, callable_spec, not_found_hint, put_on_path, search_path, source_kind
from .dtypes import LOW_PRECISION
from .model_file import as_module, build_without_weights, call_user, entry_point, import_model_file, on_meta, split_inputs
from .user_code import describe, user_code


class ModelSource:
    """One PyTorch model: how to build it and make its example inputs.

    ``name``: the model as the user named it (a path, a directory, a spec); ``entry``: its
    factory's name in messages; ``make_inputs``: the example inputs (None: there are none,
    ``missing_inputs`` says so, ``how`` how to give them); ``module``: the model file's module,
    whose other functions (``get_batches``, ``--data FUNCTION``) the commands read.
    """

    def __init__(self, name: str, entry: str, make_model, inputs: str = "get_example_inputs",
                 make_inputs=None, *, module=None, load: LoadOptions | None = None,
                 missing_inputs: str | None = None, how: str = "(use --inputs to name it)", own_weights=None,
                 notes=(), small=None, generated: bool = False):
        self.name, self.entry, self.inputs = name, entry, inputs
        self.make_model, self.make_inputs, self.module = make_model, make_inputs, module
        self.load = load or LoadOptions()
        self.missing_inputs = missing_inputs or f"no function {inputs}()"
        self.how = how
        #: (directory, loader): weights a library loads itself (a Hugging Face directory's shards)
        self.own_weights = own_weights
        #: what a report should say about how the model or its inputs were made (an assumed image size)
        self.notes = list(notes)
        self._small = small  # () -> a ModelSource of the same model, built small (a smaller config)
        #: the example inputs are the scan's, made from a config or --input-shape, not the user's code
        self.generated = generated

    # ------------------------------------------------------------------ the model
    def build(self):
        """The model as the factory builds it (a CaptureError when it is no nn.Module)."""
        return as_module(call_user(self.make_model, self.name, self.entry), self.name, self.entry)

    def build_without_weights(self):
        """(model, note): built with parameter storage skipped (``model_file.build_without_weights``)."""
        return build_without_weights(self.make_model, self.name, self.entry)

    def small_build(self):
        """The same model built small enough to run on real tensors anywhere (a Hugging Face
        config shrunk: ``small_config``), to tell a model's own error from the scan's; None
        when the source has no smaller build (a model file builds what it builds)."""
        return self._small() if self._small is not None else None

    def build_loaded(self, weights: str | None, seed: int = 0):
        """The model in fp32 and eval mode with real weights: the checkpoint's (``weights``),
        or its own init drawn from ``seed``."""
        import torch

        from .weights import load_weights, read_state_dict

        own = self.load_own(weights)
        if own is not None:
            return own
        state = read_state_dict(weights) if weights else None  # bad weights fail before user code
        torch.manual_seed(seed)
        model = self.build()
        if state is not None:
            load_weights(model, state, weights)
        elif on_meta(model):
            raise UsageError(f"{self.name}: the model is on the meta device: give its weights with --weights")
        model._apply(lambda t: t.float() if t.dtype in LOW_PRECISION else t)
        return model.eval()

    def load_own(self, weights: str | None, **placement):
        """The model with its own weights loaded by its library (``placement``: accelerate's
        ``device_map``, ``max_memory``, ``offload_folder``), when ``weights`` names them;
        else None."""
        if not weights or self.own_weights is None or not os.path.isdir(weights) \
                or not os.path.samefile(weights, self.own_weights[0]):
            return None
        return self.own_weights[1](**placement)

    # ------------------------------------------------------------------ its inputs
    @property
    def has_inputs(self) -> bool:
        return self.make_inputs is not None

    def example_inputs(self, needed_by: str | None = None) -> tuple[tuple, dict]:
        """(args, kwargs) of the example inputs; without any, a UsageError saying that
        ``needed_by`` needs them and how to give them."""
        if self.make_inputs is None:
            raise UsageError(f"{self.name}: {needed_by or 'this command'} needs example inputs: "
                             f"{self.missing_inputs} {self.how}")
        return split_inputs(call_user(self.make_inputs, self.name, self.inputs), self.name, self.inputs)

    def function(self, name: str):
        """The model file's function ``name`` (``get_batches``, a ``--data`` function), or the
        callable a ``module:callable`` spec names; None when there is none."""
        if callable_spec(name):
            return import_callable(name, self.load)
        fn = getattr(self.module, name, None) if self.module is not None else None
        return fn if callable(fn) else None


def open_source(name: str, load: LoadOptions | None = None) -> ModelSource:
    """The model source ``name`` names: a model file, a Hugging Face directory or config.json,
    or a ``module:callable`` spec."""
    load = load or LoadOptions()
    kind = source_kind(name)
    if kind == "huggingface":
        source = _open_huggingface(name, load)
    elif kind == "callable":
        source = _open_callable(name, load)
    else:
        source = _open_model_file(name, load)
    if callable_spec(load.inputs):  # --inputs module:callable, for any model
        source.make_inputs, source.inputs = import_callable(load.inputs, load), load.inputs
    return source


def _open_model_file(path: str, load: LoadOptions) -> ModelSource:
    if load.input_shapes:
        raise UsageError("--input-shape is for ONNX models, Hugging Face directories and module:callable "
                         "specs; a model file's example inputs give the shapes")
    module = import_model_file(path, load.pythonpath)
    make_model = entry_point(module, path, load.entry, required=True)
    make_inputs = None if callable_spec(load.inputs) else entry_point(module, path, load.inputs, required=False)
    return ModelSource(path, load.entry, make_model, load.inputs, make_inputs, module=module, load=load)


def _open_huggingface(name: str, load: LoadOptions) -> ModelSource:
    from .huggingface import huggingface_model

    return _huggingface_source(name, huggingface_model(name, () if callable_spec(load.inputs) else load.input_shapes),
                               load)


def _huggingface_source(name: str, found, load: LoadOptions) -> ModelSource:
    def small():
        made = found.small()
        return None if made is None else _huggingface_source(name, made, load)

    return ModelSource(name, found.architecture, found.make_model, "generated inputs", found.make_inputs,
                       load=load, missing_inputs=f"{found.architecture}'s {found.main_input} is not generated",
                       how="(give the inputs with --inputs module:callable)",
                       own_weights=(found.directory, found.load_pretrained), notes=found.notes, small=small,
                       generated=True)


def _open_callable(spec: str, load: LoadOptions) -> ModelSource:
    """``module:callable``: the callable returns the model (an nn.Module the spec names is
    the model itself). Example inputs: ``--inputs module:callable``, else generated from
    ``--input-shape``."""
    import torch

    found = import_callable(spec, load)
    make_model = (lambda: found) if isinstance(found, torch.nn.Module) else found
    make_inputs = shaped_inputs(load.input_shapes) if load.input_shapes else None
    return ModelSource(spec, callable_spec(spec)[1], make_model, "--input-shape", make_inputs, load=load,
                       missing_inputs="no --input-shape", how="(give --input-shape DIMS or --inputs module:callable)",
                       generated=make_inputs is not None)


def import_callable(spec: str, load: LoadOptions):
    """The callable ``module:callable`` names, its module imported with the working directory
    and ``--pythonpath`` searched first (as uvicorn imports an app)."""
    module_name, attribute = callable_spec(spec)
    directories = search_path(None, load)
    put_on_path(directories)
    try:
        with user_code(spec, f"importing {module_name}"):
            found = importlib.import_module(module_name)
    except CaptureError:
        raise
    except ModuleNotFoundError as exc:
        raise CaptureError(f"{spec}: no module named {exc.name!r}{not_found_hint(exc, directories)}") from exc
    except Exception as exc:  # noqa: BLE001 - the module's own failure is reported, not raised
        raise CaptureError(f"{spec}: importing {module_name} failed: {describe(exc)}") from exc
    for part in attribute.split("."):
        if not hasattr(found, part):
            raise CaptureError(f"{spec}: {module_name} has no attribute {attribute}")
        found = getattr(found, part)
    if not callable(found):
        raise CaptureError(f"{spec}: {attribute} is {type(found).__name__}, not a callable")
    return found


def shaped_inputs(shapes) -> callable:
    """The example inputs ``--input-shape`` describes: float32 standard normal tensors, positional
    for bare DIMS (``1x3x224x224``) and keyword arguments for NAME=DIMS."""
    from ..shapes import parse_shapes

    given = parse_shapes(shapes, names=False)

    def make():
        import torch

        if given[0][0] is None:
            return tuple(torch.randn(dims) for _, dims in given)
        return {name: torch.randn(dims) for name, dims in given}

    return make

