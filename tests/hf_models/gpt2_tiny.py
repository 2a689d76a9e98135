"""Tiny Hugging Face GPT-2 (2 layers, d=64) with GPT-2's real vocabulary of 50257, random weights.

get_model: transformers' default attention (SDPA); get_eager_model: eager attention
(matmul → scale → softmax); get_upcast_model: eager with ``reorder_and_upcast_attn``, whose
baddbmm runs under ``torch.autocast(..., enabled=False)`` on fp32 q/k with the scale folded in.
"""
import torch
from transformers import GPT2Config, GPT2LMHeadModel

VOCAB = 50257


def _build(**overrides):
    torch.manual_seed(0)
    config = GPT2Config(n_layer=2, n_embd=64, n_head=4, n_positions=128, vocab_size=VOCAB,
                        use_cache=False, **overrides)
    return GPT2LMHeadModel(config).eval()


def get_model():
    return _build()


def get_eager_model():
    return _build(attn_implementation="eager")


def get_upcast_model():
    return _build(attn_implementation="eager", reorder_and_upcast_attn=True)


def get_example_inputs():
    ids = torch.randint(0, VOCAB, (2, 16))
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
