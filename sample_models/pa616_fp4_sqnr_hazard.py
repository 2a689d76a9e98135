"""PA616 hazard under --dtype mxfp4 --data example: every 32nd channel of the MLP's input holds a
constant 14 (a norm bias made register channels): each 32-value MXFP4 block's power-of-2 scale
follows it, and the input comes back at about 12 dB, below torchao's 13 dB floor (NVFP4's
16-value blocks with E4M3 scales keep the same input at 21 dB)."""
import torch
import torch.nn.functional as F
from torch import nn


class Block(nn.Module):
    def __init__(self, d, ff):
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.up = nn.Linear(d, ff)
        self.down = nn.Linear(ff, d)

    def forward(self, x):
        return x + self.down(F.gelu(self.up(self.norm(x))))


class TinyLM(nn.Module):
    def __init__(self, vocab=1024, d=256, ff=1024):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.block = Block(d, ff)
        self.norm = nn.LayerNorm(d)

    def forward(self, ids):
        return F.linear(self.norm(self.block(self.embed(ids))), self.embed.weight).float()


def get_model():
    torch.manual_seed(0)
    model = TinyLM()
    with torch.no_grad():
        model.block.norm.weight[::32] = 0.0  # channels 0, 32, 64, ...: a constant 14
        model.block.norm.bias[::32] = 14.0
    return model


def get_example_inputs():
    return (torch.randint(0, 1024, (2, 64), generator=torch.Generator().manual_seed(0)),)
