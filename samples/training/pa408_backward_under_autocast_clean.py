"""PA408 clean twin: the autocast block ends with the loss; backward runs outside it."""
import torch


def train(model, loader, optimizer, loss_fn):
    scaler = torch.amp.GradScaler("cuda")
    for x, y in loader:
        optimizer.zero_grad()
        with torch.autocast(device_type="cuda", dtype=torch.float16):
            loss = loss_fn(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
