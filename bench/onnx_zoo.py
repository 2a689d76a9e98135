"""Real architectures from ``bench/zoo/hf_zoo.py`` exported to ONNX for ``onnx_bench.py``.

Issue 25's side-by-side set: GPT-2 (the LM head's logits), ViT, ResNet and ConvNeXt
(classification logits), T5's encoder and Whisper's encoder (last hidden state); the
gated MLP of that set is ``bench/models/onnx_softplus_gate.py``, already in the bench.
Each is built from its config with seed-0 weights (no hub) and exported with the example
inputs of the zoo, without labels and without a decoder, so that the graph is inference
only. ``onnx_bench.py --samples zoo:gpt2 ...`` (or ``--zoo``) runs them.
"""
from __future__ import annotations

import os
import sys
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "zoo"))

PREFIX = "zoo:"
NAMES = ["gpt2", "vit", "t5_encoder", "resnet", "convnext", "whisper_encoder"]


class _First(torch.nn.Module):
    """The model's first output (logits or last hidden state) as the graph's only output."""

    def __init__(self, model, names):
        super().__init__()
        self.model, self.names = model, names

    def forward(self, *args):
        return self.model(**dict(zip(self.names, args)), return_dict=False)[0]


def _build(name: str):
    """(module, example inputs as a tuple, input names) of a zoo model."""
    import hf_zoo
    import transformers as tf

    if name == "t5_encoder":
        cfg, kwargs, vocab, _ = hf_zoo.SEQ2SEQ["t5"]
        torch.manual_seed(0)
        model = tf.T5EncoderModel(getattr(tf, cfg)(**kwargs, vocab_size=vocab)).eval()
        inputs = hf_zoo._lm_inputs(vocab, labels=False)()
        return model, (inputs["input_ids"], inputs["attention_mask"]), ["input_ids", "attention_mask"]
    if name == "whisper_encoder":
        build, make = hf_zoo.ZOO["whisper"]
        return build().model.encoder, (make()["input_features"],), ["input_features"]
    build, make = hf_zoo.ZOO[name]
    inputs = make()
    if "pixel_values" in inputs:
        return build(), (inputs["pixel_values"],), ["pixel_values"]
    return build(), (inputs["input_ids"], inputs["attention_mask"]), ["input_ids", "attention_mask"]


def export_zoo(sample: str, directory: str, dynamo: bool, dynamic: bool = False) -> str:
    """``zoo:NAME`` exported by the dynamo (torch.export) or the legacy exporter; ``dynamic``:
    with the batch (and the sequence of token inputs) as symbolic dims."""
    from onnx_models import export_name, onnx_export

    name = sample[len(PREFIX):]
    if name not in NAMES:
        raise ValueError(f"{sample}: not one of {', '.join(PREFIX + n for n in NAMES)}")
    path = os.path.join(directory, export_name(name, dynamo, dynamic))
    if not os.path.exists(path):
        model, inputs, names = _build(name)
        onnx_export(_First(model.eval(), names).eval(), inputs, path, dynamo, names=names, dynamic=dynamic)
    return path
