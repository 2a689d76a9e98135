"""PA101 hazard: fp16 attention probabilities fed to a log (scan with --mode pure).

CUDA's softmax accumulates in fp32 but stores its probabilities in fp16, where every value
below 6e-8 is 0: ``probs.log()`` (an attention-entropy regulariser) turns those into -inf
and the entropy into NaN.
"""
import torch
from torch import nn


class Attention(nn.Module):
    def __init__(self, d=64):
        super().__init__()
        self.qkv = nn.Linear(d, 3 * d)

    def forward(self, x):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        scores = (q * q.shape[-1] ** -0.5) @ k.transpose(-2, -1)
        probs = scores.softmax(dim=-1)
        entropy = -(probs * probs.log()).sum(-1)  # log of fp16 probabilities that rounded to 0
        return (probs @ v).float(), entropy.float()


def get_model():
    return Attention()


def get_example_inputs():
    return (torch.randn(2, 16, 64),)
