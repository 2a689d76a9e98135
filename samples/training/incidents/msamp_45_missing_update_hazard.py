"""Azure/MS-AMP PR #45: "[Bug Fixed] add `scaler.update()` in MNIST examples".

Source (read): https://github.com/Azure/MS-AMP/pull/45 (merged)

PR #36 introduced ``scaler.step(optimizer)`` in the MNIST example without a following
``scaler.update()``; the second batch raised "RuntimeError: step() has already been called
since the last update()" from ``train(args, model, device, train_loader, optimizer, epoch)``.
Fix: "add `scaler.update()` after `scaler.step(optimizer)`". The loop around the two calls is
a minimal MNIST ``train()``; MS-AMP's own initialisation (``msamp.initialize``) is left out.
"""
import argparse

import torch
import torch.nn.functional as F

scaler = torch.amp.GradScaler("cuda")


def train(args, model, device, train_loader, optimizer, epoch):
    model.train()
    for batch_idx, (data, target) in enumerate(train_loader):
        data, target = data.to(device), target.to(device)
        optimizer.zero_grad()
        with torch.autocast(device_type="cuda", dtype=torch.float16):
            output = model(data)
            loss = F.nll_loss(output, target)
        scaler.scale(loss).backward()
        scaler.step(optimizer)  # expect: PA402
        if batch_idx % args.log_interval == 0:
            print(f"Train Epoch: {epoch} [{batch_idx}]\tLoss: {loss.item():.6f}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--log-interval", type=int, default=10)
    args = parser.parse_args()
    device = torch.device("cuda")
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(784, 10), torch.nn.LogSoftmax(dim=1)).to(device)
    optimizer = torch.optim.Adadelta(model.parameters(), lr=1.0)
    for epoch in range(1, args.epochs + 1):
        train(args, model, device, [], optimizer, epoch)


if __name__ == "__main__":
    main()
