"""A language model whose output head shares the embedding's weight (tied weights)."""
import torch
from torch import nn


class TiedLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(32, 16)
        self.head = nn.Linear(16, 32, bias=False)
        self.head.weight = self.embed.weight

    def forward(self, ids):
        return self.head(self.embed(ids))


def get_model():
    return TiedLM()


def get_example_inputs():
    return (torch.randint(0, 32, (2, 5)),)
