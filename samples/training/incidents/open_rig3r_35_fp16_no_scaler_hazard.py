"""engichang1467/Open-Rig3R #35: autocast defaults to fp16 on CUDA and there is no GradScaler.

Source (read): https://github.com/engichang1467/Open-Rig3R/issues/35 (closed)

"``scripts/train.py:272`` (train) and ``:301`` (val) enter autocast without a dtype ... On CUDA,
``torch.amp.autocast`` defaults to fp16 ... And there is no scaler anywhere in the file ...
Small gradients ... silently vanish. There is no error, no NaN, no warning: the loss curve just
flattens earlier than it should". Fix proposed in the issue: "On Ampere or newer, use bf16 and
no scaler is needed". The device comes from ``torch.cuda.is_available()``, so the finding
should name the condition "when device is cuda". Cut down from the issue's quotes.
"""
import torch
from torch.amp import autocast


def train_one_epoch(model, loader, optimizer, criterion, device):
    model.train()
    for images, metadata, targets in loader:
        images = images.to(device)
        with autocast(device_type=str(device)):
            outputs = model(images, metadata)
            loss = criterion(outputs, targets)
        optimizer.zero_grad()
        loss.backward()  # expect: PA403 [if cuda|device]
        optimizer.step()


@torch.no_grad()
def validate(model, loader, criterion, device):
    model.eval()
    total = 0.0
    for images, metadata, targets in loader:
        with autocast(device_type=str(device)):
            total += criterion(model(images.to(device), metadata), targets).item()
    return total


def main(model, train_loader, val_loader, criterion, epochs: int = 10):
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = model.to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.05)
    for epoch in range(epochs):
        train_one_epoch(model, train_loader, optimizer, criterion, device)
        validate(model, val_loader, criterion, device)
