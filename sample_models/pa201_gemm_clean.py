"""PA201 clean twin: the hidden width is padded to 104; a batch of 5 is the user's choice."""
import torch
from torch import nn


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.up = nn.Linear(64, 104)
        self.down = nn.Linear(104, 64)

    def forward(self, x):
        return self.down(torch.relu(self.up(x))).float()


def get_model():
    return MLP()


def get_example_inputs():
    return (torch.randn(5, 64),)
