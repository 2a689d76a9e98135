"""PA615 hazard under --dtype nvfp4 --data example: a norm gain makes input channel 7 of the
MLP's first Linear 200 times the others (a massive activation, Sun et al. 2024): channels
0-15 share its NVFP4 block scale and round to 0 in every token."""
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
        model.block.norm.weight[7] = 200.0  # channel 7 leaves the norm 200 times the rest
    return model


def get_example_inputs():
    return (torch.randint(0, 1024, (2, 64), generator=torch.Generator().manual_seed(0)),)
