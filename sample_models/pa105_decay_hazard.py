"""PA105 hazard: the decay gate of pa105_decay_clean.py with the sign lost, in a pure fp16
model: ``8 * sigmoid(gate) * softplus(param)`` is >= 0 and unbounded above (softplus grows
like its argument), so ``exp`` of it overflows fp16 once it passes 11.09, as soon as the
learned ``param`` passes about 1.4 (scan with --mode pure)."""
import torch
import torch.nn.functional as F
from torch import nn


class DecayGate(nn.Module):
    def __init__(self, d=64):
        super().__init__()
        self.gate = nn.Linear(d, d)
        self.param = nn.Parameter(torch.randn(d))

    def forward(self, x):
        log_a = 8.0 * torch.sigmoid(self.gate(x)) * F.softplus(self.param)
        a = torch.exp(log_a)
        return (a * x).float()


def get_model():
    return DecayGate()


def get_example_inputs():
    return (torch.randn(4, 64),)
