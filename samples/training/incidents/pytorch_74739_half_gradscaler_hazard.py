"""pytorch #74739: "Attempting to unscale FP16 gradients" - a ``.half()`` model under a GradScaler.

Sources (read):
  https://github.com/pytorch/pytorch/issues/74739
  https://github.com/pytorch/pytorch/pull/26512 (GradScaler's design review)

"whenever you have a pure fp16-model or just 1 module of fp16 in the fp32 model, always the
error: ValueError: Attempting to unscale FP16 gradients." ... "In my case, fp16 grad causes from
fp16 model weight. I think gradscaler unsupport fp16 grad because gradscaler is used to update
fp32 weight by fp16 loss". In the design review mcarilli: "the parameters themselves (the ones
owned by the optimizer) will always be FP32". ``scaler.step`` raises on the first batch; the
plain SGD would also update fp16 weights with no fp32 master copy. Minimal reproduction of the
pattern the thread describes.
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
    model = Net().cuda().half()  # expect: PA405
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)  # expect: PA407
    scaler = torch.amp.GradScaler("cuda")
    for _ in range(epochs):
        for data, target in loader:
            data, target = data.cuda().half(), target.cuda()
            optimizer.zero_grad()
            with torch.autocast(device_type="cuda", dtype=torch.float16):
                loss = F.cross_entropy(model(data), target)
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
