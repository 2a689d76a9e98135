"""A rotary embedding whose cos/sin caches (plain attributes, filled on first use) are built
from positions made in the activations' dtype: bf16 holds integers exactly only up to 256,
fp16 up to 2048, so positions of a 3000-token sequence collide (in steps of up to 16 in
bf16) and so do their angles. Pure (``model.half()``) or under autocast (the positions take
a Linear's output dtype) alike. The frequencies are computed in fp32, as Hugging Face does
since its bf16 ``inv_freq`` incident; the plan makes the positions in fp32 too."""
import torch
from torch import nn


class Rotary(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim
        self.cache = None

    def forward(self, x):
        if self.cache is None or self.cache[0].shape[0] != x.shape[1]:
            inv_freq = 1.0 / 10000 ** (torch.arange(0, self.dim, 2, dtype=torch.float32) / self.dim)
            t = torch.arange(x.shape[1], dtype=x.dtype)
            freqs = torch.outer(t.float(), inv_freq)
            emb = torch.cat([freqs, freqs], dim=-1)
            self.cache = (emb.cos().to(x.dtype), emb.sin().to(x.dtype))
        cos, sin = self.cache
        x1, x2 = x.chunk(2, dim=-1)
        return x * cos + torch.cat([-x2, x1], dim=-1) * sin


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = nn.Linear(16, 16)
        self.rotary = Rotary(16)
        self.out = nn.Linear(16, 4)

    def forward(self, x):
        return self.out(self.rotary(self.inp(x))).float()


def get_model():
    return Net()


def get_example_inputs():
    return (torch.randn(1, 3000, 16),)
