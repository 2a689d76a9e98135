"""PA401 clean twin: scaler.unscale_(optimizer) before clipping (PyTorch AMP examples,
"Gradient clipping")."""
import argparse

import torch
from torch import nn


def train_one_epoch(model, loader, optimizer, scaler, use_amp, max_norm=1.0):
    for inputs, targets in loader:
        optimizer.zero_grad()
        with torch.autocast("cuda", dtype=torch.float16, enabled=use_amp):
            loss = nn.functional.cross_entropy(model(inputs), targets)
        scaler.scale(loss).backward()
        # Unscales the gradients of optimizer's assigned params in-place
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
        scaler.step(optimizer)
        scaler.update()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--amp", action="store_true")
    args = parser.parse_args()
    model = nn.Linear(16, 4).cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("cuda", enabled=args.amp)
    loader = [(torch.randn(8, 16).cuda(), torch.randint(0, 4, (8,)).cuda())] * 10
    train_one_epoch(model, loader, optimizer, scaler, args.amp)


if __name__ == "__main__":
    main()
