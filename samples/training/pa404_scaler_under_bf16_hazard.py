"""PA404 hazard: the GradScaler stays enabled when --fp16 is not set, where the loss is
computed under bfloat16 autocast."""
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
    scaler = torch.amp.GradScaler("cuda")
    for x, y in [(torch.randn(4, 16).cuda(), torch.randn(4, 1).cuda())] * 10:
        with torch.autocast("cuda", dtype=dtype):
            loss = F.mse_loss(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad()


if __name__ == "__main__":
    main()
