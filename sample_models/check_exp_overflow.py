"""Check demo: a hand-written softmax whose exp overflows in a pure fp16 model.

``torch.exp`` of a logit above 11.09 is inf in fp16, and inf / inf is NaN. With
``--mode pure`` (``model.half()``) nothing upcasts it. The plan runs ``exp`` and ``sum``
of the gating head in fp32; the encoder's GEMMs stay in fp16.

    precisionaudit plan sample_models/check_exp_overflow.py --mode pure -o amp_plan.yaml
    precisionaudit check sample_models/check_exp_overflow.py --mode pure --plan amp_plan.yaml
"""
import torch
import torch.nn as nn


class Gate(nn.Module):
    """Sharpened routing weights over experts, softmax written by hand (no max subtraction)."""

    def __init__(self, dim: int, experts: int, temperature: float = 0.02):
        super().__init__()
        self.logits = nn.Linear(dim, experts)
        self.temperature = temperature

    def forward(self, x):
        scores = torch.exp(self.logits(x) / self.temperature)
        return scores / scores.sum(dim=-1, keepdim=True)


class Router(nn.Module):
    def __init__(self, dim: int = 256, experts: int = 8):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))
        self.gate = Gate(dim, experts)

    def forward(self, x):
        return self.gate(self.encoder(x)).float()


def get_model():
    return Router()


def get_example_inputs():
    return (torch.randn(64, 256),)
