"""lucidrains/e2-tts-pytorch PR #24 "fix gradient accumulation": the trainer clipped with
``accelerator.clip_grad_norm_`` on every micro-step ("otherwise _unscale_gradient halfway if
mixed precision used") and did not pass the accumulation steps to the Accelerator.

Sources (read):
  https://github.com/lucidrains/e2-tts-pytorch/pull/24 ("1. correctly pass in
  grad_accumulation_steps value to trainer 2. fix sync issue, otherwise _unscale_gradient halfway
  if mixed precision used")
  accelerate 1.15.0 ``Accelerator.clip_grad_norm_`` / ``AcceleratedOptimizer.step``

Shaped after the PR's description (e2_tts_pytorch/trainer.py ``E2Trainer``): the accumulation
steps reach the Accelerator (item 1 of the PR), the clip is not under ``sync_gradients``.
"""
from accelerate import Accelerator


class E2Trainer:
    def __init__(self, model, optimizer, grad_accumulation_steps=1, max_grad_norm=1.0, accelerate_kwargs=dict()):
        self.accelerator = Accelerator(gradient_accumulation_steps=grad_accumulation_steps, **accelerate_kwargs)
        self.model, self.optimizer = self.accelerator.prepare(model, optimizer)
        self.max_grad_norm = max_grad_norm

    def train(self, train_dataloader, epochs):
        for epoch in range(epochs):
            self.model.train()
            for batch in train_dataloader:
                with self.accelerator.accumulate(self.model):
                    loss, cond, pred = self.model(batch["mel"], text=batch["text"], lens=batch["mel_lengths"])
                    self.accelerator.backward(loss)
                    if self.max_grad_norm > 0:
                        self.accelerator.clip_grad_norm_(self.model.parameters(), self.max_grad_norm)  # expect: PA402 [if fp16|mixed_precision]
                    self.optimizer.step()
                    self.optimizer.zero_grad()
