"""Tiny Hugging Face Llama (2 layers, d=64, GQA) with Llama's real vocabulary of 32000, random weights.

get_model: transformers' default attention (SDPA); get_eager_model: eager attention. RMSNorm
upcasts to fp32 explicitly (``hidden_states.to(torch.float32).pow(2).mean(-1)``) and the rotary
embedding computes its angles from ``position_ids.float()``.
"""
import torch
from transformers import LlamaConfig, LlamaForCausalLM

VOCAB = 32000


def _build(**overrides):
    torch.manual_seed(0)
    config = LlamaConfig(num_hidden_layers=2, hidden_size=64, num_attention_heads=4,
                         num_key_value_heads=2, intermediate_size=128,
                         max_position_embeddings=128, vocab_size=VOCAB, use_cache=False,
                         **overrides)
    return LlamaForCausalLM(config).eval()


def get_model():
    return _build()


def get_eager_model():
    return _build(attn_implementation="eager")


def get_example_inputs():
    ids = torch.randint(0, VOCAB, (2, 16))
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
