"""PA116 clean twin of pa116_offset_cast_hazard.py: the LayerNorm1P keeps ``weight + 1.0``
and the normalisation in fp32 (autocast off, the input upcast) and hands the result back in
the input's dtype: the offset is applied before anything is rounded."""
import torch
import torch.nn.functional as F
from torch import nn


class LayerNorm1P(nn.LayerNorm):
    def forward(self, input):
        with torch.autocast(device_type=input.device.type, enabled=False):
            out = F.layer_norm(input.float(), self.normalized_shape, self.weight + 1.0, self.bias, self.eps)
        return out.to(input.dtype)


class Block(nn.Module):
    def __init__(self, d=64):
        super().__init__()
        self.proj = nn.Linear(d, d)
        self.norm = LayerNorm1P(d)
        with torch.no_grad():
            self.norm.weight.fill_(0.003)  # a learned offset from 1, below half of bf16's step

    def forward(self, x):
        return self.norm(self.proj(x)).float()


def get_model():
    return Block()


def get_example_inputs():
    return (torch.randn(2, 8, 64),)
