"""An LSTM and a -1e9 ``torch.where`` mask behind control flow on a tensor's value: the scan
runs it eagerly, where CPU has no fp16 LSTM kernel (CUDA's cuDNN has one) and CPU would
write -inf for the mask scalar (CUDA refuses it)."""
import torch
from torch import nn


class GatedTagger(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.LSTM(32, 32, batch_first=True)
        self.head = nn.Linear(32, 32)

    def forward(self, x):
        out, _ = self.rnn(x)
        scores = self.head(out)
        if scores.sum() > -1e30:  # fake tensors cannot decide this
            scores = torch.where(scores > 0, scores, -1e9)
        return scores.float()


def get_model():
    return GatedTagger()


def get_example_inputs():
    return (torch.randn(2, 8, 32),)
