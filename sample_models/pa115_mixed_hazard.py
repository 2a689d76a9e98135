"""PA115 hazard: a coordinate grid built in the forward (float32) meets fp16 activations in a
convolution and a matmul once the model is .half() (RAFT's coords_grid)."""
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
        coords = torch.stack([xs, ys] * 4).float().expand(n, 8, h, w)  # float32 whatever the model
        f = self.update(torch.cat([f, coords], 1))  # cat promotes: a float32 input, half weights
        basis = torch.eye(f.shape[1])  # float32 again
        return self.head(f.mean((2, 3)) @ basis)


def get_model():
    return Flow()


def get_example_inputs():
    return (torch.randn(1, 3, 16, 16),)
