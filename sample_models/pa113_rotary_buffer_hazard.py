"""PA113 hazard (pure fp16, ``model.half()``): GPT-NeoX's rotary embedding before its fix
(EleutherAI/gpt-neox #1003). ``inv_freq`` is a registered buffer, so ``model.half()`` makes it
fp16; the positions take its dtype (``type_as``) and their outer product with it, the phase,
is computed and stored in fp16: phases up to 2047 rad are 1 apart there, and cos/sin of
position 1857 are off by up to 0.78."""
import torch
from torch import nn


class RotaryEmbedding(nn.Module):
    def __init__(self, dim, base=10000):
        super().__init__()
        inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim))
        self.register_buffer("inv_freq", inv_freq)

    def forward(self, x):
        t = torch.arange(x.shape[1], device=x.device).type_as(self.inv_freq)
        freqs = torch.einsum("i,j->ij", t, self.inv_freq)  # fp16 phases up to 2047
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos()[None, :, None, :], emb.sin()[None, :, None, :]


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


class RotaryAttentionInput(nn.Module):
    """The query projection of one attention layer, rotated by the embedding's cos/sin."""

    def __init__(self, heads=4, head_dim=32):
        super().__init__()
        self.heads, self.head_dim = heads, head_dim
        self.query = nn.Linear(heads * head_dim, heads * head_dim)
        self.rotary = RotaryEmbedding(head_dim)

    def forward(self, x):
        q = self.query(x).view(x.shape[0], x.shape[1], self.heads, self.head_dim)
        cos, sin = self.rotary(q)
        return q * cos + rotate_half(q) * sin


def get_model():
    return RotaryAttentionInput()


def get_example_inputs():
    return (torch.randn(1, 2048, 128),)
