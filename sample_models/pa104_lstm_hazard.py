"""PA104 hazard: an LSTM over 512 steps under CUDA autocast (cuDNN runs it in fp16)."""
import torch
from torch import nn


class Tagger(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.LSTM(64, 64, batch_first=True)
        self.head = nn.Linear(64, 64)

    def forward(self, x):
        out, _ = self.rnn(x)
        return self.head(out).float()


def get_model():
    return Tagger()


def get_example_inputs():
    return (torch.randn(2, 512, 64),)
