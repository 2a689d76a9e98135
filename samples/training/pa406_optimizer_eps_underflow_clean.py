"""PA406 clean twin: the same flag now picks the autocast dtype, not the weights' dtype:
the weights and AdamW's state stay fp32, where eps=1e-8 is 1e-8 (the PyTorch AMP recipe)."""
import argparse

import torch
from torch import nn
from torch.optim import AdamW


def build_optimizer(model, lr):
    no_decay = ["bias", "norm"]
    groups = [
        {"params": [p for n, p in model.named_parameters() if not any(k in n for k in no_decay)], "weight_decay": 0.01},
        {"params": [p for n, p in model.named_parameters() if any(k in n for k in no_decay)], "weight_decay": 0.0},
    ]
    return AdamW(groups, lr=lr)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--fp16", action="store_true")
    parser.add_argument("--lr", type=float, default=1e-4)
    args = parser.parse_args()
    dtype = torch.float16 if args.fp16 else torch.float32
    model = nn.TransformerEncoderLayer(d_model=64, nhead=4).cuda()
    optimizer = build_optimizer(model, args.lr)
    scaler = torch.amp.GradScaler("cuda", enabled=(dtype == torch.float16))
    for _ in range(10):
        x = torch.randn(16, 8, 64, device="cuda")
        with torch.autocast("cuda", dtype=dtype, enabled=args.fp16):
            loss = model(x).float().pow(2).mean()
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad()


if __name__ == "__main__":
    main()
