"""Tiny Hugging Face Falcon (2 layers, d=64, 4 heads) with ALiBi and eager attention, random weights.

get_model: the ALiBi path (`query_layer @ key_layer.transpose(-1, -2)` stored in fp16 under
autocast, upcast to fp32 only after it, then `attention_logits *= self.inv_norm_factor`).
"""
import torch
from transformers import FalconConfig, FalconForCausalLM

VOCAB = 65024


def get_model():
    torch.manual_seed(0)
    config = FalconConfig(num_hidden_layers=2, hidden_size=64, num_attention_heads=4, alibi=True,
                          vocab_size=VOCAB, use_cache=False, attn_implementation="eager")
    return FalconForCausalLM(config).eval()


def get_example_inputs():
    ids = torch.randint(0, VOCAB, (2, 16))
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
