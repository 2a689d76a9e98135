"""A Hugging Face model directory (``config.json``, optionally ``*.safetensors`` shards) as a
model source: the model transformers builds from the config, and example inputs made from it.

The model class is the architecture the config names (``architectures[0]``, a transformers
class: ``GPT2LMHeadModel``), else the base model ``AutoModel`` gives for its ``model_type``;
it is built with the config as a model file would build it (``Cls(config)``: float32 master
weights whatever dtype the checkpoint was saved in, eval mode), on the meta device when a scan
builds it (``build_without_weights``). Code the config points to (``auto_map``:
``trust_remote_code``) is never run.

Example inputs follow the model's ``main_input_name``: token ids (``input_ids``: one sequence
of ``DEFAULT_TOKENS`` tokens, or the model's position limit when lower, uniform over the
vocabulary, with an all-ones ``attention_mask`` and, for encoder-decoders, the same ids as
``decoder_input_ids``) or pixel values (``pixel_values``: one image of the config's
``num_channels`` x ``image_size``, standard normal). ``--input-shape`` gives other dims
(``input_ids=4x512``, ``pixel_values=2x3x384x384``, or the bare dims of the main input).
"""
from __future__ import annotations

import inspect
import os

from collections.abc import Callable
from dataclasses import dataclass

from ...core.errors import UsageError
from ..shapes import parse_shapes
from ..sources import hf_config_path, read_hf_config

#: sequences and tokens of the generated token ids
DEFAULT_BATCH, DEFAULT_TOKENS = 1, 128
#: images of the generated pixel values
DEFAULT_IMAGES = 1
_POSITION_LIMITS = ("max_position_embeddings", "n_positions", "max_seq_len")


@dataclass
class HuggingFaceModel:
    architecture: str  # the class's name: what a report names as the entry
    make_model: Callable
    make_inputs: Callable | None  # None: the main input is not one that is generated
    main_input: str
    directory: str  # where config.json is: its shards are the model's own weights
    load_pretrained: Callable  # (**placement) -> the model with the directory's weights


def huggingface_model(name: str, input_shapes=()) -> HuggingFaceModel:
    """The model of the Hugging Face directory (or config.json) ``name``, and its generated
    example inputs (``input_shapes``: --input-shape)."""
    data = read_hf_config(name)  # model_type and architectures, checked before any model code
    config = _config(name, data)
    cls = _model_class(name, config)
    directory = os.path.dirname(os.path.abspath(hf_config_path(name)))
    return HuggingFaceModel(cls.__name__, lambda: cls(config).eval(), _inputs(name, config, cls, input_shapes),
                            cls.main_input_name, directory, _pretrained(cls, config, directory))


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
    """The transformers class of ``architectures[0]``, checked to be a model for this config;
    without architectures, the base model of the model_type (what ``AutoModel`` builds)."""
    transformers = _transformers(name)
    from transformers.models.auto.modeling_auto import MODEL_MAPPING

    path = hf_config_path(name)
    architectures = getattr(config, "architectures", None)
    if not architectures:
        if type(config) not in MODEL_MAPPING:
            raise UsageError(f"{path}: no architectures, and transformers has no base model for "
                             f"model_type {config.model_type!r}")
        return MODEL_MAPPING[type(config)]
    architecture = architectures[0]
    cls = getattr(transformers, architecture, None) if architecture.isidentifier() else None
    if not (isinstance(cls, type) and issubclass(cls, transformers.PreTrainedModel)):
        raise UsageError(f"{path}: unknown architecture {architecture!r} (not a model class of "
                         f"transformers {transformers.__version__})")
    if not isinstance(config, cls.config_class):
        raise UsageError(f"{path}: architecture {architecture} takes a {cls.config_class.__name__}, "
                         f"and model_type {config.model_type!r} is a {type(config).__name__}")
    return cls


def _inputs(name: str, config, cls, shapes):
    """The function that makes the example inputs of the model, or None when its main input
    is neither token ids nor pixel values (then --inputs module:callable gives them)."""
    main = cls.main_input_name
    given = parse_shapes(shapes, names=False)
    unknown = [n for n, _ in given if n not in (None, main)]
    if unknown or len(given) > 1:
        raise UsageError(f"--input-shape: {cls.__name__} takes one generated input, {main}; "
                         f"give its dims as {main}=DIMS or DIMS")
    dims = given[0][1] if given else None
    if main == "input_ids":
        return _token_ids(name, config, cls, dims)
    if main == "pixel_values":
        return _pixel_values(name, config, cls, dims)
    if given:
        raise UsageError(f"--input-shape: {cls.__name__}'s input {main} is not generated (token ids and "
                         "pixel values are); give it with --inputs module:callable")
    return None


def _token_ids(name: str, config, cls, dims):
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    vocab = getattr(text, "vocab_size", None)
    if not isinstance(vocab, int) or vocab < 1:
        raise UsageError(f"{hf_config_path(name)}: no vocab_size to draw token ids from; give the inputs "
                         "with --inputs module:callable")
    limit = next((getattr(text, key) for key in _POSITION_LIMITS if isinstance(getattr(text, key, None), int)),
                 None)
    if dims is None:
        dims = (DEFAULT_BATCH, min(DEFAULT_TOKENS, limit or DEFAULT_TOKENS))
    if len(dims) != 2 or 0 in dims:
        raise UsageError(f"--input-shape {'x'.join(map(str, dims))}: input_ids is (sequences, tokens), "
                         "e.g. input_ids=2x128")
    if limit is not None and dims[1] > limit:
        raise UsageError(f"--input-shape {'x'.join(map(str, dims))}: {cls.__name__} takes at most {limit} "
                         f"tokens (the config's position limit)")
    keywords = inspect.signature(cls.forward).parameters

    def make():
        import torch

        ids = torch.randint(0, vocab, dims)
        inputs = {"input_ids": ids}
        if "attention_mask" in keywords:
            inputs["attention_mask"] = torch.ones_like(ids)
        if getattr(config, "is_encoder_decoder", False) and "decoder_input_ids" in keywords:
            inputs["decoder_input_ids"] = ids
        return inputs

    return make


def _pixel_values(name: str, config, cls, dims):
    channels = getattr(config, "num_channels", 3)
    size = getattr(config, "image_size", None)
    size = (size, size) if isinstance(size, int) else tuple(size) if isinstance(size, (list, tuple)) else None
    if dims is None:
        if size is None or len(size) != 2:
            raise UsageError(f"{hf_config_path(name)}: no image_size in the config; give the pixel values' "
                             "dims with --input-shape pixel_values=1x3xHxW")
        dims = (DEFAULT_IMAGES, channels, *size)
    if len(dims) != 4 or dims[1] != channels:
        raise UsageError(f"--input-shape {'x'.join(map(str, dims))}: pixel_values is (images, {channels} "
                         f"channels, height, width) for {cls.__name__}")

    def make():
        import torch

        return {"pixel_values": torch.randn(dims)}

    return make
