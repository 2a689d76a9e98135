"""PA405 clean twin: fp32 weights under fp16 autocast with a GradScaler (the PyTorch AMP
recipe); only an EMA copy for evaluation is halved, and it is never given to the optimizer."""
import argparse
import copy

import torch
from torch import nn


def train_one_epoch(model, loader, optimizer, scaler):
    for x, y in loader:
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.float16, enabled=scaler.is_enabled()):
            loss = nn.functional.cross_entropy(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--amp", action="store_true")
    args = parser.parse_args()
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 10)).cuda()
    ema = copy.deepcopy(model).half().eval()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    scaler = torch.amp.GradScaler("cuda", enabled=args.amp)
    loader = [(torch.randn(8, 32, device="cuda"), torch.randint(0, 10, (8,), device="cuda"))]
    train_one_epoch(model, loader, optimizer, scaler)
    return ema


if __name__ == "__main__":
    main()
