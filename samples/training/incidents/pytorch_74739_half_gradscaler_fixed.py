"""pytorch #74739, fixed: keep the parameters in fp32 and let autocast run fp16 compute.

Sources (read):
  https://github.com/pytorch/pytorch/issues/74739 - "not using gradscaler if your model" is fp16,
  or keeping fp32 weights
  https://github.com/pytorch/pytorch/pull/26512 - the optimizer's parameters "will always be FP32"

The model stays fp32 (no ``.half()``); autocast casts per op, gradients land in fp32, and the
GradScaler unscales them.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(784, 256)
        self.fc2 = nn.Linear(256, 10)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x)))


def main(loader, epochs: int = 1):
    model = Net().cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    scaler = torch.amp.GradScaler("cuda")
    for _ in range(epochs):
        for data, target in loader:
            data, target = data.cuda(), target.cuda()
            optimizer.zero_grad()
            with torch.autocast(device_type="cuda", dtype=torch.float16):
                loss = F.cross_entropy(model(data), target)
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
