"""Tiny Hugging Face T5 (2+2 layers, d=64) with T5's real vocabulary of 32128, random weights.

get_model: transformers' default attention (SDPA, with the relative position bias as the
attention mask); get_eager_model: eager attention (unscaled logits plus the position bias, then
softmax). T5's RMS-style LayerNorm upcasts to fp32 explicitly.
"""
import torch
from transformers import T5Config, T5ForConditionalGeneration

VOCAB = 32128


def _build(**overrides):
    torch.manual_seed(0)
    config = T5Config(num_layers=2, num_decoder_layers=2, d_model=64, d_kv=16, num_heads=4,
                      d_ff=128, vocab_size=VOCAB, use_cache=False, **overrides)
    return T5ForConditionalGeneration(config).eval()


def get_model():
    return _build()


def get_eager_model():
    return _build(attn_implementation="eager")


def get_example_inputs():
    ids = torch.randint(0, VOCAB, (2, 16))
    mask = torch.ones_like(ids)
    mask[1, 12:] = 0
    return {"input_ids": ids, "attention_mask": mask,
            "decoder_input_ids": torch.randint(0, VOCAB, (2, 8))}
