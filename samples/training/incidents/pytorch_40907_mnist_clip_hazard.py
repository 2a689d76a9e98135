"""pytorch #40907: "Gradient clipping with torch.cuda.amp" - the loss stops decreasing.

Source (read): https://github.com/pytorch/pytorch/issues/40907

"Right now, when I include the line `clip_grad_norm_(model.parameters(), 12)` the loss does not
decrease anymore." The reporter's script is the PyTorch mnist example with
``from torch.cuda.amp import GradScaler, autocast`` and ``from torch.nn.utils import
clip_grad_norm_``; the clip runs on gradients still multiplied by the scale (65536 at start),
so every step is clipped to a tiny fraction of the true gradient. The documented fix
(https://pytorch.org/docs/stable/notes/amp_examples.html#gradient-clipping) is
``scaler.unscale_(optimizer)`` before the clip. The script also uses the ``torch.cuda.amp``
names that PyTorch has since deprecated.
"""
import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.cuda.amp import GradScaler, autocast
from torch.nn.utils import clip_grad_norm_


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3, 1)
        self.conv2 = nn.Conv2d(32, 64, 3, 1)
        self.fc1 = nn.Linear(9216, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = F.relu(self.fc1(torch.flatten(x, 1)))
        return F.log_softmax(self.fc2(x), dim=1)


def train(args, model, device, train_loader, optimizer, epoch, scaler):
    model.train()
    for batch_idx, (data, target) in enumerate(train_loader):
        data, target = data.to(device), target.to(device)
        optimizer.zero_grad()
        with autocast():  # expect: PA409
            output = model(data)
            loss = F.nll_loss(output, target)
        scaler.scale(loss).backward()
        clip_grad_norm_(model.parameters(), 12)  # expect: PA401
        scaler.step(optimizer)
        scaler.update()


def main():
    parser = argparse.ArgumentParser(description="PyTorch MNIST Example")
    parser.add_argument("--epochs", type=int, default=14)
    parser.add_argument("--lr", type=float, default=1.0)
    args = parser.parse_args()
    device = torch.device("cuda")
    model = Net().to(device)
    optimizer = optim.Adadelta(model.parameters(), lr=args.lr)
    scaler = GradScaler()  # expect: PA409
    train_loader = torch.utils.data.DataLoader([], batch_size=64)
    for epoch in range(1, args.epochs + 1):
        train(args, model, device, train_loader, optimizer, epoch, scaler)


if __name__ == "__main__":
    main()
