"""PA402 hazards: the GradScaler protocol broken four ways.

Trainer.fit: update() on every micro-step while scaler.step runs every `accum`.
step_twice: a plain optimizer.step() beside scaler.step(optimizer).
unscaled_backward: scaler.step after a backward that was not scaled.
update_skipped: update() skipped on a branch that stepped (`continue`).
"""
import torch


class Trainer:
    def __init__(self, model, optimizer, accum, fp16):
        self.model = model
        self.optimizer = optimizer
        self.accum = accum
        self.fp16 = fp16
        self.scaler = torch.amp.GradScaler("cuda", enabled=fp16)

    def training_step(self, batch):
        with torch.autocast("cuda", dtype=torch.float16, enabled=self.fp16):
            loss = self.model(batch).mean() / self.accum
        self.scaler.scale(loss).backward()

    def optimizer_step(self):
        self.scaler.step(self.optimizer)
        self.optimizer.zero_grad()

    def fit(self, loader):
        for i, batch in enumerate(loader):
            self.training_step(batch)
            if (i + 1) % self.accum == 0:
                self.optimizer_step()
            self.scaler.update()


def step_twice(model, loader, optimizer, scaler):
    for x in loader:
        with torch.autocast("cuda", dtype=torch.float16):
            loss = model(x).mean()
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        optimizer.step()
        scaler.update()
        optimizer.zero_grad()


def unscaled_backward(model, loader, optimizer, scaler):
    for x in loader:
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(x).mean()
        loss.backward()
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad()


def update_skipped(model, loader, optimizer, scaler, log_every):
    for i, x in enumerate(loader):
        with torch.autocast("cuda", dtype=torch.float16):
            loss = model(x).mean()
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        optimizer.zero_grad()
        if i % log_every == 0:
            print(i, loss.item())
            continue
        scaler.update()
