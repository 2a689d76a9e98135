"""GPT-2 small (124 M parameters) at batch 2 x 256 tokens: the check benchmark's real-sized row.

Built from ``transformers.GPT2Config`` (random weights, nothing downloaded; eager attention,
no KV cache; ``get_sdpa_model``: SDPA) when transformers is installed, else a plain
GPT-2-shaped model of the same sizes (12 layers, d=768, 12 heads, FFN 3072, vocabulary
50257, causal mask from finfo.min).
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

LAYERS, D_MODEL, HEADS, FFN, VOCAB, CONTEXT = 12, 768, 12, 3072, 50257, 1024
BATCH, TOKENS = 2, 256


class _Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv, self.out = nn.Linear(D_MODEL, 3 * D_MODEL), nn.Linear(D_MODEL, D_MODEL)

    def forward(self, x):
        b, t, _ = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, HEADS, D_MODEL // HEADS).permute(2, 0, 3, 1, 4)
        scores = q @ k.transpose(-1, -2) / math.sqrt(D_MODEL // HEADS)
        causal = torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1)
        scores = scores.masked_fill(causal, torch.finfo(scores.dtype).min)
        weights = torch.softmax(scores, dim=-1)
        return self.out((weights @ v).transpose(1, 2).reshape(b, t, D_MODEL))


class _Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1, self.ln2, self.attn = nn.LayerNorm(D_MODEL), nn.LayerNorm(D_MODEL), _Attention()
        self.fc, self.proj = nn.Linear(D_MODEL, FFN), nn.Linear(FFN, D_MODEL)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.proj(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class PlainGPT2(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok, self.pos = nn.Embedding(VOCAB, D_MODEL), nn.Embedding(CONTEXT, D_MODEL)
        self.blocks = nn.ModuleList(_Block() for _ in range(LAYERS))
        self.ln_f = nn.LayerNorm(D_MODEL)

    def forward(self, ids):
        x = self.tok(ids) + self.pos(torch.arange(ids.shape[1], device=ids.device))
        for block in self.blocks:
            x = block(x)
        return self.ln_f(x) @ self.tok.weight.t()


class HFGPT2(nn.Module):
    """transformers' GPT2LMHeadModel returning the logits tensor only."""

    def __init__(self, attn_implementation="eager"):
        super().__init__()
        from transformers import GPT2Config, GPT2LMHeadModel

        config = GPT2Config(n_layer=LAYERS, n_embd=D_MODEL, n_head=HEADS, vocab_size=VOCAB,
                            n_positions=CONTEXT, use_cache=False, attn_implementation=attn_implementation)
        self.lm = GPT2LMHeadModel(config)

    def forward(self, ids):
        return self.lm(input_ids=ids, use_cache=False).logits


def get_model():
    try:
        return HFGPT2()
    except ImportError:
        return PlainGPT2()


def get_sdpa_model():
    """transformers' GPT-2 with F.scaled_dot_product_attention (needs transformers)."""
    return HFGPT2("sdpa")


def get_example_inputs():
    return (torch.randint(0, VOCAB, (BATCH, TOKENS)),)
