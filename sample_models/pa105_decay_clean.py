"""PA105 clean twin: a recurrence's decay gate whose exponent is never positive (Griffin's
RG-LRU, as transformers' RecurrentGemma writes it), in a pure fp16 model.

``log_a = -8 * sigmoid(gate) * softplus(param)`` is <= 0 for any weights: sigmoid is in
[0, 1] and softplus >= 0, so ``exp(log_a)`` and ``exp(2 * log_a)`` lie in [0, 1] and cannot
overflow (scan with --mode pure)."""
import torch
import torch.nn.functional as F
from torch import nn


class DecayGate(nn.Module):
    def __init__(self, d=64):
        super().__init__()
        self.gate = nn.Linear(d, d)
        self.param = nn.Parameter(torch.randn(d))

    def forward(self, x):
        log_a = -8.0 * torch.sigmoid(self.gate(x)) * F.softplus(self.param)
        a = torch.exp(log_a)
        a_square = torch.exp(2 * log_a)
        return (a * x + torch.sqrt(1 - a_square)).float()


def get_model():
    return DecayGate()


def get_example_inputs():
    return (torch.randn(4, 64),)
