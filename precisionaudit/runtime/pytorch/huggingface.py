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
``num_channels`` x ``image_size``, standard normal; without an ``image_size``, the vision
tower's (``vision_config``), else the directory's ``preprocessor_config.json``, else ImageNet
classifiers' 224, which the report's notes say). ``--input-shape`` gives other dims
(``input_ids=4x512``, ``pixel_values=2x3x384x384``, or the bare dims of the main input).
"""
from __future__ import annotations

import inspect
import json
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
    return HuggingFaceModel(cls.__name__, lambda: cls(config).eval(), _inputs(name, config, cls, input_shapes, notes),
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
    ``AutoModelForCausalLM.from_config`` gives it); without architectures, the base model of the
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
    text = (getattr(config, "sub_configs", None) or {}).get("text_config")
    if text is not None and cls.config_class is text:
        return cls, config.get_text_config()
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


def _inputs(name: str, config, cls, shapes, notes: list):
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
        return _pixel_values(name, config, cls, dims, notes)
    if given:
        raise UsageError(f"--input-shape: {cls.__name__}'s input {main} is not generated (token ids and "
                         "pixel values are); give it with --inputs module:callable")
    return None


def _token_ids(name: str, config, cls, dims):
    try:
        text = config.get_text_config() if hasattr(config, "get_text_config") else config
    except ValueError:  # several text configs (MusicGen's text encoder and decoder): the config's own
        text = config
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


#: the input size of ImageNet classifiers (torchvision's and timm's default), for a config without one
CONVENTIONAL_IMAGE_SIZE = 224


def _pixel_values(name, config, cls, dims, notes):
    vision = getattr(config, "vision_config", None) or config  # CLIP, SigLIP: the vision tower's config
    channels = getattr(config, "num_channels", None) or getattr(vision, "num_channels", 3)
    if dims is None:
        size, where = image_size(config, os.path.dirname(os.path.abspath(hf_config_path(name))))
        if size is None:
            size = (CONVENTIONAL_IMAGE_SIZE,) * 2
            notes.append(f"no image_size in the config or a preprocessor_config.json: {cls.__name__} was given "
                         f"{size[0]}x{size[1]} images, ImageNet classifiers' convention (give the pixel values' "
                         "dims with --input-shape pixel_values=1x3xHxW)")
        elif where != "image_size":
            notes.append(f"{size[0]}x{size[1]} images, from {where}")
        dims = (DEFAULT_IMAGES, channels, *size)
    if len(dims) != 4 or dims[1] != channels:
        raise UsageError(f"--input-shape {'x'.join(map(str, dims))}: pixel_values is (images, {channels} "
                         f"channels, height, width) for {cls.__name__}")

    def make():
        import torch

        return {"pixel_values": torch.randn(dims)}

    return make


def image_size(config, directory: str) -> tuple[tuple[int, int] | None, str]:
    """((height, width), where it was read) of the images a vision model takes: the config's
    ``image_size``, its vision tower's (``vision_config.image_size``: CLIP, SigLIP), else the
    image processor's in ``preprocessor_config.json`` (the center crop when it crops, else the
    resize); (None, "") when none of them says."""
    for where, holder in (("image_size", config), ("vision_config.image_size", getattr(config, "vision_config", None))):
        size = _pair(getattr(holder, "image_size", None))
        if size is not None:
            return size, where
    path = os.path.join(directory, "preprocessor_config.json")
    try:
        with open(path, encoding="utf-8") as fh:
            processor = json.load(fh)
    except (OSError, ValueError):
        return None, ""
    if not isinstance(processor, dict):
        return None, ""
    for key in (("crop_size", "size") if processor.get("do_center_crop") else ("size", "crop_size")):
        size = _pair(processor.get(key))
        if size is not None:
            return size, f"preprocessor_config.json's {key}"
    return None, ""


def _pair(value) -> tuple[int, int] | None:
    """(height, width) of an image size as configs and image processors write it: 224,
    [224, 224], {"height": 224, "width": 224} or {"shortest_edge": 224}."""
    if isinstance(value, dict):
        if "height" in value and "width" in value:
            value = [value["height"], value["width"]]
        else:
            value = value.get("shortest_edge")
    if isinstance(value, int) and not isinstance(value, bool):
        value = [value, value]
    if isinstance(value, (list, tuple)) and len(value) == 2 \
            and all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in value):
        return tuple(value)
    return None
