"""PA115 clean twin: the coordinate grid and the basis are built in the dtype of the
activations, so every convolution and matmul gets operands of one dtype."""
import torch
from torch import nn


class Flow(nn.Module):
    def __init__(self, c=16):
        super().__init__()
        self.encode = nn.Conv2d(3, c, 3, padding=1)
        self.update = nn.Conv2d(c + 8, c, 3, padding=1)
        self.head = nn.Linear(c, c)

    def forward(self, x):
        f = self.encode(x)
        n, _, h, w = f.shape
        ys, xs = torch.meshgrid(torch.arange(h), torch.arange(w), indexing="ij")
        coords = torch.stack([xs, ys] * 4).to(f.dtype).expand(n, 8, h, w)
        f = self.update(torch.cat([f, coords], 1))
        basis = torch.eye(f.shape[1], dtype=f.dtype)
        return self.head(f.mean((2, 3)) @ basis)


def get_model():
    return Flow()


def get_example_inputs():
    return (torch.randn(1, 3, 16, 16),)
