"""Tiny Hugging Face OPT (2 layers, d=64, 4 heads) with eager attention, random weights.

get_model: q is pre-scaled in full (`self.q_proj(hidden_states) * self.scaling`, scaling =
head_dim**-0.5) and the eager attention is called with scaling=1.0.
"""
import torch
from transformers import OPTConfig, OPTForCausalLM

VOCAB = 50272


def get_model():
    torch.manual_seed(0)
    config = OPTConfig(num_hidden_layers=2, hidden_size=64, num_attention_heads=4, ffn_dim=128,
                       word_embed_proj_dim=64, vocab_size=VOCAB, use_cache=False,
                       attn_implementation="eager")
    return OPTForCausalLM(config).eval()


def get_example_inputs():
    ids = torch.randint(0, VOCAB, (2, 16))
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
