"""PA403 clean twin: the scaler is enabled exactly when the dtype is float16, and bfloat16
autocast needs none."""
import argparse

import torch
import torch.nn.functional as F


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--fp16", action="store_true")
    args = parser.parse_args()
    model = torch.nn.Linear(16, 1).cuda()
    optimizer = torch.optim.AdamW(model.parameters())
    dtype = torch.float16 if args.fp16 else torch.bfloat16
    scaler = torch.amp.GradScaler("cuda", enabled=(dtype == torch.float16))
    for x, y in [(torch.randn(4, 16).cuda(), torch.randn(4, 1).cuda())] * 10:
        with torch.autocast("cuda", dtype=dtype):
            loss = F.mse_loss(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad()


def finetune(model, loader, optimizer):
    for x, y in loader:
        with torch.autocast("cuda", dtype=torch.bfloat16):
            out = model(x)
        loss = F.mse_loss(out.float(), y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()


if __name__ == "__main__":
    main()
