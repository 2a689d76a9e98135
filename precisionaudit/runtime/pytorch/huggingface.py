"""A Hugging Face model directory (``config.json``, optionally ``*.safetensors`` shards) as a
model source: the model transformers builds from the config, and example inputs made from it.

The model class is the architecture the config names (``architectures[0]``, a transformers
class: ``GPT2LMHeadModel``), else the base model ``AutoModel`` gives for its ``model_type``;
it is built with the config as a model file would build it (``Cls(config)``: float32 master
weights whatever dtype the checkpoint was saved in, eval mode), on the meta device when a scan
builds it (``build_without_weights``). Code the config points to (``auto_map``:
``trust_remote_code``) is never run.

Its example inputs are generated from the config (``hf_inputs.generated_inputs``).
"""
from __future__ import annotations

import os

from collections.abc import Callable
from dataclasses import dataclass

from ...core.errors import UsageError
from ..sources import hf_config_path, read_hf_config
from .hf_inputs import generated_inputs


@dataclass
class HuggingFaceModel:
    architecture: str  # the class's name: what a report names as the entry
    make_model: Callable
    make_inputs: Callable | None  # None: the main input is not one that is generated
    main_input: str
    directory: str  # where config.json is: its shards are the model's own weights
    load_pretrained: Callable  # (**placement) -> the model with the directory's weights
    notes: list  # how the inputs were made where the config did not say (the report's notes)
    small: Callable  # () -> the same model from its config made small (``small_config``), or None


def huggingface_model(name: str, input_shapes=()) -> HuggingFaceModel:
    """The model of the Hugging Face directory (or config.json) ``name``, and its generated
    example inputs (``input_shapes``: --input-shape)."""
    data = read_hf_config(name)  # model_type and architectures, checked before any model code
    config = _config(name, data)
    cls, config = _model_class(name, config)
    return _model(name, config, cls, input_shapes)


def _model(name: str, config, cls, input_shapes) -> HuggingFaceModel:
    directory = os.path.dirname(os.path.abspath(hf_config_path(name)))
    notes = []
    return HuggingFaceModel(cls.__name__, lambda: cls(config).eval(), generated_inputs(name, config, cls, input_shapes, notes),
                            cls.main_input_name, directory, _pretrained(cls, config, directory), notes,
                            lambda: _small(name, config, cls, input_shapes))


def _small(name: str, config, cls, input_shapes) -> HuggingFaceModel | None:
    """The model of the config made small (``small_config``), None when there is none."""
    from .small_config import small_config

    small = small_config(config)
    if small is None:
        return None
    try:
        return _model(name, small, cls, input_shapes)
    except UsageError:  # its inputs cannot be generated
        return None


def _pretrained(cls, config, directory: str):
    """The loader of the directory's own weights: transformers' ``from_pretrained`` (in
    float32), which maps a checkpoint's key names to the class's (ViT's checkpoints keep
    ``encoder.layer.N``), and the weights that do not fit, one line naming the keys."""
    def load(**placement):
        import torch

        try:
            model, info = cls.from_pretrained(directory, config=config, dtype=torch.float32, local_files_only=True,
                                              output_loading_info=True, **placement)
        except Exception as exc:  # noqa: BLE001 - a checkpoint transformers cannot read is bad input
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise UsageError(f"{directory}: transformers cannot load the weights: {first[:300]}") from exc
        problems = [f"{what.removesuffix('_keys')}: {', '.join(map(str, keys[:3]))}"
                    + (f" and {len(keys) - 3} more" if len(keys) > 3 else "")
                    for what, keys in info.items() if what.endswith("_keys") and keys]
        if problems:
            raise UsageError(f"{directory}: the weights do not fit the model ({'; '.join(problems)})")
        return model.eval()

    return load


def _transformers(name: str):
    try:
        import transformers
    except ImportError as exc:
        raise UsageError(f"{name}: a Hugging Face model directory needs transformers "
                         "(pip install transformers)") from exc
    return transformers


def _config(name: str, data: dict):
    """The config object (local files only: no hub, no remote code)."""
    transformers = _transformers(name)
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    path = hf_config_path(name)
    if data["model_type"] not in CONFIG_MAPPING:
        code = (": its auto_map names the model's own code, which precisionaudit does not run (write a model "
                "file that builds the model)") if "auto_map" in data else ""
        raise UsageError(f"{path}: unknown model_type {data['model_type']!r} (transformers "
                         f"{transformers.__version__} does not know it){code}")
    try:
        return transformers.AutoConfig.from_pretrained(os.path.dirname(os.path.abspath(path)),
                                                       local_files_only=True)
    except Exception as exc:  # noqa: BLE001 - a config transformers refuses is bad input
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UsageError(f"{path}: transformers cannot read the config: {first[:300]}") from exc


def _model_class(name: str, config):
    """(class, config): the transformers class of ``architectures[0]``, checked to be a model
    for this config as transformers' Auto classes check it (the class takes the config, or the
    Auto mappings pair it with the config's model_type: ``exaone`` builds ``LlamaForCausalLM``),
    and the config it takes (a composite config's text config when the class takes that, as
    ``AutoModelForCausalLM.from_config`` gives it, or the one sub-config of the class's config
    class: MusicGen's ``decoder``); without architectures, the base model of the
    model_type (what ``AutoModel`` builds)."""
    transformers = _transformers(name)
    from transformers.models.auto.modeling_auto import MODEL_MAPPING

    path = hf_config_path(name)
    architectures = getattr(config, "architectures", None)
    if not architectures:
        if type(config) not in MODEL_MAPPING:
            raise UsageError(f"{path}: no architectures, and transformers has no base model for "
                             f"model_type {config.model_type!r}")
        return MODEL_MAPPING[type(config)], config
    architecture = architectures[0]
    cls = getattr(transformers, architecture, None) if architecture.isidentifier() else None
    if not (isinstance(cls, type) and issubclass(cls, transformers.PreTrainedModel)):
        raise UsageError(f"{path}: unknown architecture {architecture!r} (not a model class of "
                         f"transformers {transformers.__version__})")
    if isinstance(config, cls.config_class):
        return cls, config
    sub_configs = getattr(config, "sub_configs", None) or {}
    if sub_configs.get("text_config") is cls.config_class:
        return cls, config.get_text_config()
    taken = [key for key, sub in sub_configs.items() if sub is cls.config_class]
    if len(taken) == 1:  # MusicGen's causal LM is its decoder, built from the config's decoder
        return cls, getattr(config, taken[0])
    if architecture in _auto_classes(config.model_type):
        return cls, config
    raise UsageError(f"{path}: architecture {architecture} takes a {cls.config_class.__name__}, "
                     f"and model_type {config.model_type!r} is a {type(config).__name__}")


def _auto_classes(model_type: str) -> set[str]:
    """The class names transformers' Auto mappings give for ``model_type``, every task."""
    from transformers.models.auto import modeling_auto

    names = set()
    for attribute in dir(modeling_auto):
        mapping = getattr(modeling_auto, attribute)
        if attribute.endswith("_MAPPING_NAMES") and isinstance(mapping, dict):
            found = mapping.get(model_type, ())
            names.update((found,) if isinstance(found, str) else found)
    return names
