"""PA402 clean twin: the same four loops with the protocol kept."""
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
        self.scaler.unscale_(self.optimizer)
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
        self.scaler.step(self.optimizer)
        self.scaler.update()
        self.optimizer.zero_grad()

    def fit(self, loader):
        for i, batch in enumerate(loader):
            self.training_step(batch)
            if (i + 1) % self.accum == 0:
                self.optimizer_step()


def step_once(model, loader, optimizer, scaler):
    for x in loader:
        with torch.autocast("cuda", dtype=torch.float16):
            loss = model(x).mean()
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad()


def scaled_backward(model, loader, optimizer, scaler):
    for x in loader:
        with torch.autocast("cuda", dtype=torch.float16):
            loss = model(x).mean()
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad()


def update_kept(model, loader, optimizer, scaler, log_every):
    for i, x in enumerate(loader):
        with torch.autocast("cuda", dtype=torch.float16):
            loss = model(x).mean()
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad()
        if i % log_every == 0:
            print(i, loss.item())
            continue
