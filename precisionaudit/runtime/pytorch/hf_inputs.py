"""Example inputs generated from a Hugging Face config, for a directory that holds no code.

They follow the model's ``main_input_name``: token ids (``input_ids``: one sequence of
``DEFAULT_TOKENS`` tokens, or the model's position limit when lower, one per codebook where the
class documents its ids so (MusicGen), uniform over the vocabulary, with an all-ones
``attention_mask`` and, for encoder-decoders, the same ids as ``decoder_input_ids``) or pixel
values (``pixel_values``, or the main input of a class the image-classification mapping lists,
as Perceiver's ``inputs``: one image of the config's ``num_channels`` x ``image_size``, standard
normal; without an ``image_size``, the vision tower's (``vision_config``), else the directory's
``preprocessor_config.json``, else ImageNet classifiers' 224, which the report's notes say).
A model that takes its images as patches (SigLIP 2's NaFlex: ``spatial_shapes`` beside
``pixel_values``) gets the config's number of patches, all of them valid. ``--input-shape``
gives other dims (``input_ids=4x512``, ``pixel_values=2x3x384x384``, or the bare dims of the
main input).
"""
from __future__ import annotations

import inspect
import json
import math
import os

from ...core.errors import UsageError
from ..shapes import parse_shapes
from ..sources import hf_config_path

#: sequences and tokens of the generated token ids
DEFAULT_BATCH, DEFAULT_TOKENS = 1, 128
#: images of the generated pixel values
DEFAULT_IMAGES = 1
_POSITION_LIMITS = ("max_position_embeddings", "n_positions", "max_seq_len")


def generated_inputs(name: str, config, cls, shapes, notes: list):
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
    if "spatial_shapes" in inspect.signature(cls.forward).parameters and main == "pixel_values":
        return _patches(name, config, cls, dims)
    if main == "pixel_values" or _image_classifier(cls):
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
    limit = next((getattr(text, key) for key in _POSITION_LIMITS  # XLNet's -1: no limit
                  if isinstance(getattr(text, key, None), int) and getattr(text, key) > 0), None)
    if dims is None:
        dims = (DEFAULT_BATCH * _codebooks(cls, text), min(DEFAULT_TOKENS, limit or DEFAULT_TOKENS))
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


def _codebooks(cls, text) -> int:
    """The sequences one sample is: the config's ``num_codebooks`` where the class documents its
    token ids as one sequence per codebook (MusicGen's decoder: ``(batch_size * num_codebooks,
    sequence_length)``), else 1."""
    documented = "(batch_size * num_codebooks, sequence_length)" in (cls.forward.__doc__ or "")
    books = getattr(text, "num_codebooks", None)
    return books if documented and isinstance(books, int) and books > 0 else 1


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

    main = cls.main_input_name

    def make():
        import torch

        return {main: torch.randn(dims)}

    return make


def _image_classifier(cls) -> bool:
    """True for a class transformers' image-classification mapping lists (its main input is
    an image, whatever it is called)."""
    from transformers.models.auto.modeling_auto import MODEL_FOR_IMAGE_CLASSIFICATION_MAPPING_NAMES

    return any(cls.__name__ in ((names,) if isinstance(names, str) else names)
               for names in MODEL_FOR_IMAGE_CLASSIFICATION_MAPPING_NAMES.values())


def _patches(name, config, cls, dims):
    """SigLIP 2's NaFlex inputs: ``pixel_values`` as (images, patches, channels x patch x
    patch), the config's ``num_patches`` of them in a square grid, all valid."""
    vision = getattr(config, "vision_config", None) or config
    patches, size = getattr(vision, "num_patches", None), getattr(vision, "patch_size", None)
    channels = getattr(vision, "num_channels", 3)
    side = math.isqrt(patches) if isinstance(patches, int) and patches > 0 else 0
    if dims is not None or side * side != patches or not isinstance(size, int):
        raise UsageError(f"{hf_config_path(name)}: {cls.__name__} takes its images as patches with their "
                         "spatial shapes; give the inputs with --inputs module:callable")

    def make():
        import torch

        return {"pixel_values": torch.randn(DEFAULT_IMAGES, patches, channels * size * size),
                "pixel_attention_mask": torch.ones(DEFAULT_IMAGES, patches, dtype=torch.int32),
                "spatial_shapes": torch.tensor([[side, side]] * DEFAULT_IMAGES)}

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
