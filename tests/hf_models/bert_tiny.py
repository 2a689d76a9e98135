"""Tiny Hugging Face BERT (2 layers, d=64) with BERT's real vocabulary of 30522, random weights.

get_model: transformers' default attention (SDPA); get_eager_model: eager attention, where the
padding mask is added as an additive float mask filled with ``torch.finfo(dtype).min``.
"""
import torch
from transformers import BertConfig, BertForMaskedLM

VOCAB = 30522


def _build(**overrides):
    torch.manual_seed(0)
    config = BertConfig(num_hidden_layers=2, hidden_size=64, num_attention_heads=4,
                        intermediate_size=128, max_position_embeddings=128, vocab_size=VOCAB,
                        use_cache=False, **overrides)
    return BertForMaskedLM(config).eval()


def get_model():
    return _build()


def get_eager_model():
    return _build(attn_implementation="eager")


def get_example_inputs():
    ids = torch.randint(0, VOCAB, (2, 16))
    mask = torch.ones_like(ids)
    mask[1, 12:] = 0  # padding, so the attention mask is not all ones
    return {"input_ids": ids, "attention_mask": mask}
