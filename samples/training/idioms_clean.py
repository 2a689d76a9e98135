"""Idiomatic, correct mixed-precision training through the libraries that handle the
protocol themselves: accelerate, the HF Trainer, Lightning; and a Trainer-like class
whose scaler is disabled under bfloat16. None of it may give a finding."""
import argparse

import lightning as L
import torch
from accelerate import Accelerator
from transformers import Trainer, TrainingArguments


def accelerate_loop(model, optimizer, loader, loss_fn):
    accelerator = Accelerator(mixed_precision="fp16", gradient_accumulation_steps=4)
    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
    for inputs, targets in loader:
        with accelerator.accumulate(model):
            with accelerator.autocast():
                loss = loss_fn(model(inputs), targets)
            accelerator.backward(loss)
            if accelerator.sync_gradients:
                accelerator.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            optimizer.zero_grad()


def hf_trainer(model, train_dataset):
    args = TrainingArguments(output_dir="out", fp16=True, max_grad_norm=1.0)
    Trainer(model=model, args=args, train_dataset=train_dataset).train()


def lightning_fit(module, loader):
    L.Trainer(precision="16-mixed", gradient_clip_val=1.0).fit(module, loader)


class AmpTrainer:
    """Keeps its scaler and optimizer across methods; fp16 or bf16 by flag."""

    def __init__(self, model, optimizer, args):
        self.model = model
        self.optimizer = optimizer
        self.dtype = torch.float16 if args.fp16 else torch.bfloat16
        self.scaler = torch.amp.GradScaler("cuda", enabled=(self.dtype == torch.float16))
        self.accum = args.accum

    def training_step(self, batch):
        with torch.autocast("cuda", dtype=self.dtype):
            loss = self.model(**batch).loss / self.accum
        self.scaler.scale(loss).backward()
        return loss.detach()

    def optimizer_step(self):
        self.scaler.unscale_(self.optimizer)
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
        self.scaler.step(self.optimizer)
        self.scaler.update()
        self.optimizer.zero_grad(set_to_none=True)

    def train(self, loader):
        for i, batch in enumerate(loader):
            self.training_step(batch)
            if (i + 1) % self.accum == 0:
                self.optimizer_step()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--fp16", action="store_true")
    parser.add_argument("--accum", type=int, default=1)
    args = parser.parse_args()
    model = torch.nn.Linear(4, 4)
    AmpTrainer(model, torch.optim.AdamW(model.parameters()), args).train([])


if __name__ == "__main__":
    main()
