"""PA611 hazard under --dtype nvfp4: an MLP width of 1032, not a multiple of 16, so neither MLP
GEMM can run in NVFP4 (Transformer Engine's quantizer needs K and N divisible by 16)."""
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
    def __init__(self, vocab=1024, d=256, ff=1032):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.block = Block(d, ff)
        self.norm = nn.LayerNorm(d)

    def forward(self, ids):
        # the head is the embedding matrix read by F.linear: no nn.Linear to convert, it stays bf16
        return F.linear(self.norm(self.block(self.embed(ids))), self.embed.weight).float()


def get_model():
    return TinyLM()


def get_example_inputs():
    return (torch.randint(0, 1024, (2, 16)),)
