"""PA202 clean twin: the vocabulary is padded to 50304, a multiple of 64 (as nanoGPT does)."""
import torch
from torch import nn


class TinyLM(nn.Module):
    def __init__(self, vocab=50304, d=64):
        super().__init__()
        self.wte = nn.Embedding(vocab, d)
        self.lm_head = nn.Linear(d, vocab, bias=False)

    def forward(self, ids):
        return self.lm_head(self.wte(ids)).float()


def get_model():
    return TinyLM()


def get_example_inputs():
    return (torch.randint(0, 50257, (2, 16)),)
