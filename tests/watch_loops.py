"""Small real training loops for precisionaudit.watch's tests: CPU autocast in float16 with
``torch.amp.GradScaler("cpu")``, and pure bfloat16. Each hazard has a clean twin.

- ``Gated``: a hand-written softmax-style gate, ``exp(score)``: float16's exp overflows past
  11.09, which the outlier batches from ``OUTLIER_STEP`` on reach (the forward turns inf);
- ``Entropy``: ``where(p > 0, log p, 0)`` over a float16 softmax whose small probabilities
  round to 0: the forward stays finite, the gradient of log is 0/0 = NaN, GradScaler skips
  every step;
- ``NormNet``: a pure-bfloat16 net whose LayerNorm gain (1.0) takes Adam updates of ~lr,
  below half a bfloat16 ulp of 1.0 (2^-8): every update of it rounds away.

Run as a script (``python watch_loops.py gated LOG_DIR STEPS``) it trains with the watch
and, with ``--kill-at N``, dies at step N without closing it (a killed job).
"""
from __future__ import annotations

import os
import sys

import torch
from torch import nn

import precisionaudit

OUTLIER_STEP = 12
#: the outlier batches' scale: scores reach ~25 > 11.09 (float16's exp overflows) while
#: float32's exp (overflow past 88.7) stays finite
OUTLIER_SCALE = 30.0


class Gate(nn.Module):
    def __init__(self):
        super().__init__()
        self.score, self.value = nn.Linear(16, 8), nn.Linear(16, 8)

    def forward(self, x):
        w = torch.exp(self.score(x))
        return (w * self.value(x)).sum(-1) / w.sum(-1)


class Gated(nn.Module):
    def __init__(self):
        super().__init__()
        self.inp, self.gate, self.out = nn.Linear(16, 16), Gate(), nn.Linear(1, 1)

    def forward(self, x):
        return self.out(self.gate(torch.relu(self.inp(x))).unsqueeze(-1)).pow(2).mean()


class Entropy(nn.Module):
    """Dropout and BatchNorm too: a replay that moved the generator or the running
    statistics would change the run after it."""

    def __init__(self, masked: bool = True):
        super().__init__()
        self.masked = masked
        self.norm, self.drop, self.fc = nn.BatchNorm1d(16), nn.Dropout(0.1), nn.Linear(16, 32)

    def forward(self, x):
        logits = self.fc(self.drop(self.norm(x))) * 12
        p = torch.softmax(logits, -1)
        if self.masked:
            logp = torch.where(p > 0, torch.log(p), torch.zeros_like(p))
        else:  # the clean twin: log_softmax, finite gradients
            logp = torch.log_softmax(logits, -1)
        return -(p * logp).sum(-1).mean()


class NormNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.norm, self.fc2 = nn.Linear(16, 16), nn.LayerNorm(16), nn.Linear(16, 1)

    def forward(self, x):
        return self.fc2(self.norm(torch.relu(self.fc1(x)))).pow(2).mean()


class Block(nn.Module):
    """A pre-norm residual block: x + fc2(relu(fc1(norm(x))))."""

    def __init__(self, width: int = 16):
        super().__init__()
        self.norm, self.fc1, self.fc2 = nn.LayerNorm(width), nn.Linear(width, 2 * width), nn.Linear(2 * width, width)

    def forward(self, x):
        return x + self.fc2(torch.relu(self.fc1(self.norm(x))))


class Residual(nn.Module):
    """Seven pre-norm residual blocks (14 Linears) over a float32 residual stream; block 3's
    fc2 is scaled so that its float16 output passes 65504 (a float32 value of ~1e5, which
    the float32 residual stream holds and the next block's norm brings back in range)."""

    OVERFLOWING = "blocks.3.fc2"

    def __init__(self, width: int = 16, blocks: int = 7):
        super().__init__()
        self.blocks = nn.ModuleList(Block(width) for _ in range(blocks))
        self.norm = nn.LayerNorm(width)
        with torch.no_grad():
            self.blocks[3].fc2.weight.mul_(200000.0)

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return self.norm(x).pow(2).mean()


class MaskedMean(nn.Module):
    """A masked mean over each row's kept positions: a row with no kept position is 0/0, NaN in
    float32 too (no precision fixes it; masking the empty rows does)."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)

    def forward(self, x):
        mask = (x > 0).to(x.dtype)  # a row of x with no positive entry has no kept position
        h = self.fc(x)
        return ((h * mask).sum(-1) / mask.sum(-1)).pow(2).mean()


def empty_row_batch(step: int) -> torch.Tensor:
    """From step 2 on, one row with no positive entry."""
    x = torch.randn(8, 16, generator=torch.Generator().manual_seed(4000 + step)).abs()
    if step >= 2:
        x[3] = -x[3]
    return x


def gated_batch(step: int, outliers: bool = True) -> torch.Tensor:
    g = torch.Generator().manual_seed(1000 + step)
    scale = OUTLIER_SCALE if outliers and step >= OUTLIER_STEP else 1.0
    return torch.randn(8, 16, generator=g) * scale


def entropy_batch(step: int) -> torch.Tensor:
    return torch.randn(8, 16, generator=torch.Generator().manual_seed(2000 + step))


def train_fp16(model, batches, steps: int, log_dir=None, plan=None, every: int = 5, kill_at=None, lr=1e-3,
               device: str = "cpu"):
    """fp16 autocast + GradScaler + SGD on ``device`` (CPU here; bench/gpu_truth.py runs the
    same loop on CUDA); the losses (as Python floats) and the final parameters.
    ``log_dir``: watched; ``plan``: applied first."""
    torch.manual_seed(0)
    model = model.to(device)
    if plan is not None:
        precisionaudit.apply_plan(model, plan)
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    scaler = torch.amp.GradScaler(device)
    watch = precisionaudit.watch(model, opt, scaler, log_dir=log_dir, every=every) if log_dir else None
    losses = []
    for step in range(steps):
        if kill_at is not None and step == kill_at:
            os._exit(0)  # dies: no close(), no flush of anything but what was written
        opt.zero_grad()
        with torch.autocast(device, dtype=torch.float16):
            loss = model(batches(step).to(device))
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        if watch is not None:
            watch.step(loss)
        losses.append(loss.item())
    if watch is not None:
        watch.close()
    return losses, [p.detach().clone() for p in model.parameters()]


def train_bf16(model, steps: int, log_dir=None, every: int = 5, lr: float = 1.5e-3):
    """Pure bfloat16 parameters and AdamW (its state bfloat16 too), no scaler."""
    torch.manual_seed(0)
    model = model.to(torch.bfloat16)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    watch = precisionaudit.watch(model, opt, log_dir=log_dir, every=every) if log_dir else None
    losses = []
    for step in range(steps):
        opt.zero_grad()
        x = torch.randn(8, 16, generator=torch.Generator().manual_seed(3000 + step)).to(torch.bfloat16)
        loss = model(x)
        loss.backward()
        opt.step()
        if watch is not None:
            watch.step(loss)
        losses.append(loss.item())
    if watch is not None:
        watch.close()
    return losses


if __name__ == "__main__":
    kind, log_dir, steps = sys.argv[1], sys.argv[2], int(sys.argv[3])
    kill = int(sys.argv[sys.argv.index("--kill-at") + 1]) if "--kill-at" in sys.argv else None
    torch.manual_seed(0)
    train_fp16(Gated(), gated_batch, steps, log_dir, kill_at=kill)
