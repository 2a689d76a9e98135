"""engichang1467/Open-Rig3R #35, fixed as the issue proposes: autocast to bf16, no scaler.

Source (read): https://github.com/engichang1467/Open-Rig3R/issues/35 (closed)

"On Ampere or newer, use bf16 and no scaler is needed - same 8 exponent bits as fp32".
With an explicit ``dtype=torch.bfloat16`` the CUDA default (fp16) no longer applies, and bf16
gradients do not underflow where fp16 ones do.
"""
import torch
from torch.amp import autocast


def train_one_epoch(model, loader, optimizer, criterion, device):
    model.train()
    for images, metadata, targets in loader:
        images = images.to(device)
        with autocast(device_type=str(device), dtype=torch.bfloat16):
            outputs = model(images, metadata)
            loss = criterion(outputs, targets)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


@torch.no_grad()
def validate(model, loader, criterion, device):
    model.eval()
    total = 0.0
    for images, metadata, targets in loader:
        with autocast(device_type=str(device), dtype=torch.bfloat16):
            total += criterion(model(images.to(device), metadata), targets).item()
    return total


def main(model, train_loader, val_loader, criterion, epochs: int = 10):
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = model.to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.05)
    for epoch in range(epochs):
        train_one_epoch(model, train_loader, optimizer, criterion, device)
        validate(model, val_loader, criterion, device)
