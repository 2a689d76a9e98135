"""PA602 hazard under --dtype float8: the LM head is an nn.Linear, converted to FP8 with the rest."""
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
    def __init__(self, vocab=4096, d=1024, ff=4096):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.block = Block(d, ff)
        self.norm = nn.LayerNorm(d)
        self.lm_head = nn.Linear(d, vocab, bias=False)

    def forward(self, ids):
        return self.lm_head(self.norm(self.block(self.embed(ids)))).float()


def get_model():
    return TinyLM()


def get_example_inputs():
    return (torch.randint(0, 4096, (2, 16)),)
