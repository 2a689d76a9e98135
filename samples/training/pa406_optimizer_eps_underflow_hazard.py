"""PA406 hazard (glide-finetune #5): fp16 weights chosen by a flag, AdamW with the default
eps=1e-8, which is 0 in fp16: NaN weights after the first step."""
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
    model = nn.TransformerEncoderLayer(d_model=64, nhead=4).cuda().to(dtype)
    optimizer = build_optimizer(model, args.lr)
    for _ in range(10):
        x = torch.randn(16, 8, 64, device="cuda", dtype=dtype)
        loss = model(x).float().pow(2).mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()


if __name__ == "__main__":
    main()
