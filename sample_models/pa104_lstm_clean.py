"""PA104 clean twin: the recurrence runs with autocast disabled, in fp32."""
import torch
from torch import nn


class Tagger(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.LSTM(64, 64, batch_first=True)
        self.head = nn.Linear(64, 64)

    def forward(self, x):
        with torch.autocast("cuda", enabled=False):
            out, _ = self.rnn(x.float())
        return self.head(out).float()


def get_model():
    return Tagger()


def get_example_inputs():
    return (torch.randn(2, 512, 64),)
