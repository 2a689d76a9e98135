"""pytorch #40907, fixed: unscale before clipping (and the current torch.amp names).

Source (read): https://github.com/pytorch/pytorch/issues/40907
Fix as documented: https://pytorch.org/docs/stable/notes/amp_examples.html#gradient-clipping

``scaler.unscale_(optimizer)`` divides the gradients by the scale in place, so the clip sees
the true norm; ``scaler.step`` then knows they are already unscaled. ``torch.amp.autocast`` /
``torch.amp.GradScaler`` with the device replace the deprecated ``torch.cuda.amp`` names.
"""
import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.amp import GradScaler, autocast
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
        with autocast("cuda"):
            output = model(data)
            loss = F.nll_loss(output, target)
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        clip_grad_norm_(model.parameters(), 12)
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
    scaler = GradScaler("cuda")
    train_loader = torch.utils.data.DataLoader([], batch_size=64)
    for epoch in range(1, args.epochs + 1):
        train(args, model, device, train_loader, optimizer, epoch, scaler)


if __name__ == "__main__":
    main()
