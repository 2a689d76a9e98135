"""PA612 hazard under --dtype nvfp4: a stack of 8 blocks and an nn.Linear LM head, all converted
to FP4; NVIDIA's NVFP4 recipe keeps the head and the last block's Linears in bf16."""
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
    def __init__(self, vocab=1024, d=128, ff=512, depth=8):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.layers = nn.ModuleList(Block(d, ff) for _ in range(depth))
        self.norm = nn.LayerNorm(d)
        self.lm_head = nn.Linear(d, vocab, bias=False)

    def forward(self, ids):
        h = self.embed(ids)
        for layer in self.layers:
            h = layer(h)
        return self.lm_head(self.norm(h)).float()


def get_model():
    return TinyLM()


def get_example_inputs():
    return (torch.randint(0, 1024, (2, 16)),)
