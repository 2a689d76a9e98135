"""transformers PR #21428, fixed: grad scaling only when the autocast dtype is float16.

Sources (read):
  https://github.com/huggingface/transformers/pull/21428 (merged): "Turn off gradient scaling in
  the trainer when bf16 mode is selected. Only use gradient scaling in float16 mode." -
  ``self.do_grad_scaling = self.amp_dtype == torch.float16``, the scaler set up under
  ``if self.do_grad_scaling``.

The PR left the deprecated ``torch.cuda.amp.GradScaler`` in place (a ``residual`` PA409).
"""
import argparse

import torch


class Trainer:
    def __init__(self, model, args, train_dataloader):
        self.model = model
        self.args = args
        self.train_dataloader = train_dataloader
        self.optimizer = torch.optim.AdamW(model.parameters(), lr=args.learning_rate, eps=args.adam_epsilon)
        self.use_cuda_amp = False
        self.do_grad_scaling = False
        if args.fp16 or args.bf16:
            self.use_cuda_amp = True
            self.amp_dtype = torch.float16 if args.fp16 else torch.bfloat16
            self.do_grad_scaling = self.amp_dtype == torch.float16
            if self.do_grad_scaling:
                self.scaler = torch.cuda.amp.GradScaler()  # residual: PA409

    def training_step(self, inputs):
        self.model.train()
        with torch.autocast(device_type="cuda", dtype=self.amp_dtype, enabled=self.use_cuda_amp):
            loss = self.model(**inputs).loss
        if self.do_grad_scaling:
            self.scaler.scale(loss).backward()
        else:
            loss.backward()
        return loss.detach()

    def optimizer_step(self):
        if self.do_grad_scaling:
            self.scaler.unscale_(self.optimizer)
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.args.max_grad_norm)
        if self.do_grad_scaling:
            self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            self.optimizer.step()
        self.optimizer.zero_grad()

    def train(self):
        for inputs in self.train_dataloader:
            self.training_step(inputs)
            self.optimizer_step()


def parse_args():
    parser = argparse.ArgumentParser()
    parser.add_argument("--fp16", action="store_true")
    parser.add_argument("--bf16", action="store_true")
    parser.add_argument("--learning_rate", type=float, default=5e-5)
    parser.add_argument("--adam_epsilon", type=float, default=1e-8)
    parser.add_argument("--max_grad_norm", type=float, default=1.0)
    return parser.parse_args()
