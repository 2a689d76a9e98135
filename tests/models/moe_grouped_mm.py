"""A mixture-of-experts layer whose experts run in one F.grouped_mm, as transformers' MoE
models do (tokens sorted by expert, offsets of each expert's rows)."""
import torch
import torch.nn.functional as F
from torch import nn

EXPERTS, HIDDEN, FFN = 4, 64, 128


class Experts(nn.Module):
    def __init__(self):
        super().__init__()
        self.router = nn.Linear(HIDDEN, EXPERTS, bias=False)
        self.up = nn.Parameter(torch.randn(EXPERTS, HIDDEN, FFN) * 0.02)
        self.down = nn.Parameter(torch.randn(EXPERTS, FFN, HIDDEN) * 0.02)

    def forward(self, x):
        tokens = x.reshape(-1, HIDDEN)
        # each expert takes an equal block of rows: offsets need no data-dependent sort
        offs = torch.arange(1, EXPERTS + 1, dtype=torch.int32) * (tokens.shape[0] // EXPERTS)
        gate = self.router(tokens).softmax(-1).amax(-1, keepdim=True)
        h = F.gelu(F.grouped_mm(tokens, self.up.to(tokens.dtype), offs=offs))
        out = F.grouped_mm(h, self.down.to(tokens.dtype), offs=offs)
        return (gate * out).reshape(x.shape)


def get_model():
    return Experts().eval()


def get_example_inputs():
    return (torch.randn(2, 16, HIDDEN),)
