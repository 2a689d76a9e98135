"""Lightning #9599: gradients clipped while still multiplied by the AMP loss scale.

Sources (read):
  https://github.com/Lightning-AI/pytorch-lightning/issues/9599
  https://github.com/Lightning-AI/pytorch-lightning/issues/9330
  https://github.com/Lightning-AI/pytorch-lightning/issues/9694

"I trained a large model using native amp, but the loss converged very slow ... I found the
`clip_gradients` is executed right after backward, but `scaler.unscale_` is conducted in
pre_optimization_step ... `gradient_clip_val` may lead to a very flat learning curve if used
together with native amp." (#9599). #9330: "The gradient norm at training_step_end is super
small!" The thread says the fix shipped in Lightning 1.4.9 (the PR, #9606, is not in the
stored corpus). Fix: unscale before clipping, as the PyTorch AMP examples document.

Cut down to plain PyTorch: a Trainer-like loop keeps the scaler on ``self`` and clips in the
backward hook, before the precision plugin's optimizer step unscales.
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
        self.clip_gradients()
        return loss

    def clip_gradients(self):
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.gradient_clip_val)  # expect: PA401

    def optimizer_step(self):
        self.scaler.step(self.optimizer)
        self.scaler.update()
        self.optimizer.zero_grad(set_to_none=True)

    def fit(self, loader, epochs: int):
        self.model.train()
        for _ in range(epochs):
            for batch in loader:
                self.training_step(batch)
                self.optimizer_step()
