"""PA202 hazard: GPT-2's vocabulary of 50257 in the output projection (a GEMM).

The embedding of the same size is only looked up (a gather, no Tensor Core GEMM): it is not
reported.
"""
import torch
from torch import nn


class TinyLM(nn.Module):
    def __init__(self, vocab=50257, d=64):
        super().__init__()
        self.wte = nn.Embedding(vocab, d)
        self.lm_head = nn.Linear(d, vocab, bias=False)

    def forward(self, ids):
        return self.lm_head(self.wte(ids)).float()


def get_model():
    return TinyLM()


def get_example_inputs():
    return (torch.randint(0, 50257, (2, 16)),)
