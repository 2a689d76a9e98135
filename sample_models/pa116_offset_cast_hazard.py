"""PA116 hazard under autocast: Nemotron's LayerNorm1P (transformers' modeling_nemotron.py).
Its weight is an offset from 1; ``weight + 1.0`` is formed in fp32, then
``_cast_if_autocast_enabled`` casts it to the autocast dtype before ``F.layer_norm``: under
bf16 autocast the scale is rounded to 2^-7 steps and offsets below 2^-8 vanish (scan with
--dtype bfloat16; under fp16 autocast the steps are 2^-10, an info)."""
import torch
import torch.nn.functional as F
from torch import nn


def _cast_if_autocast_enabled(device_type, *args):
    if not torch.is_autocast_enabled():
        return args
    return torch.amp.autocast_mode._cast(args, device_type, torch.get_autocast_dtype(device_type))


class LayerNorm1P(nn.LayerNorm):
    def forward(self, input):
        args = _cast_if_autocast_enabled(input.device.type, input, self.normalized_shape, self.weight + 1.0,
                                         self.bias, self.eps)
        with torch.autocast(device_type=input.device.type, enabled=False):
            return F.layer_norm(*args)


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
