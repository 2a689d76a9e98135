"""Lightning #9599, fixed: unscale the optimizer's gradients before clipping them.

Sources (read):
  https://github.com/Lightning-AI/pytorch-lightning/issues/9599
  https://github.com/Lightning-AI/pytorch-lightning/issues/9694

The fix (Lightning 1.4.9, per the thread) clips after the precision plugin has called
``scaler.unscale_(optimizer)``; #9694's workaround clipped in ``on_before_optimizer_step``,
after the unscale. The clip threshold then applies to the true gradient norm.
"""
import torch
from torch import nn


class NativeAmpLoop:
    def __init__(self, model: nn.Module, optimizer, gradient_clip_val: float = 1.0):
        self.model = model
        self.optimizer = optimizer
        self.gradient_clip_val = gradient_clip_val
        self.scaler = torch.amp.GradScaler("cuda")

    def training_step(self, batch):
        x, y = batch
        with torch.autocast("cuda", dtype=torch.float16):
            loss = nn.functional.cross_entropy(self.model(x), y)
        self.scaler.scale(loss).backward()
        return loss

    def optimizer_step(self):
        self.scaler.unscale_(self.optimizer)
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.gradient_clip_val)
        self.scaler.step(self.optimizer)
        self.scaler.update()
        self.optimizer.zero_grad(set_to_none=True)

    def fit(self, loader, epochs: int):
        self.model.train()
        for _ in range(epochs):
            for batch in loader:
                self.training_step(batch)
                self.optimizer_step()
