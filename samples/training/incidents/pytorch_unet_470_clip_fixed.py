"""milesial/Pytorch-UNet PR #470, fixed: ``grad_scaler.unscale_(optimizer)`` before the clip.

Source (read): https://github.com/milesial/Pytorch-UNet/pull/470 (merged)

The merged change inserts the unscale and nothing else, so the deprecated
``torch.cuda.amp.GradScaler`` stays (a ``residual`` PA409 finding).
"""
import argparse

import torch
import torch.nn as nn
from torch import optim


def train_model(model, device, train_loader, epochs: int = 5, learning_rate: float = 1e-5,
                weight_decay: float = 1e-8, momentum: float = 0.999, gradient_clipping: float = 1.0,
                amp: bool = False):
    optimizer = optim.RMSprop(model.parameters(), lr=learning_rate, weight_decay=weight_decay, momentum=momentum, foreach=True)
    scheduler = optim.lr_scheduler.ReduceLROnPlateau(optimizer, "max", patience=5)
    grad_scaler = torch.cuda.amp.GradScaler(enabled=amp)  # residual: PA409
    criterion = nn.CrossEntropyLoss() if model.n_classes > 1 else nn.BCEWithLogitsLoss()

    for epoch in range(1, epochs + 1):
        model.train()
        for batch in train_loader:
            images, true_masks = batch["image"], batch["mask"]
            images = images.to(device=device, dtype=torch.float32, memory_format=torch.channels_last)
            true_masks = true_masks.to(device=device, dtype=torch.long)

            with torch.autocast(device.type if device.type != "mps" else "cpu", enabled=amp):
                masks_pred = model(images)
                loss = criterion(masks_pred, true_masks)

            optimizer.zero_grad(set_to_none=True)
            grad_scaler.scale(loss).backward()
            grad_scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_(model.parameters(), gradient_clipping)
            grad_scaler.step(optimizer)
            grad_scaler.update()
        scheduler.step(0.0)


def get_args():
    parser = argparse.ArgumentParser(description="Train the UNet on images and target masks")
    parser.add_argument("--epochs", "-e", type=int, default=5)
    parser.add_argument("--amp", action="store_true", default=False, help="Use mixed precision")
    return parser.parse_args()


if __name__ == "__main__":
    args = get_args()
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = nn.Conv2d(3, 2, 1)
    model.n_classes = 2
    model = model.to(memory_format=torch.channels_last).to(device=device)
    train_model(model, device, train_loader=[], epochs=args.epochs, amp=args.amp)
