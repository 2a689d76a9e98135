"""accelerate #641: "Gradient accumulation doesn't work with Accelerate's `clip_grad_norm_`":
``accelerator.clip_grad_norm_`` on every micro-step inside ``accelerator.accumulate``.

Sources (read):
  https://github.com/huggingface/accelerate/issues/641 (the reporter's ``train_one_epoch``)
  accelerate 1.15.0 accelerator.py ``Accelerator.clip_grad_norm_`` (``self.unscale_gradients()``
  on every call), optimizer.py ``AcceleratedOptimizer.step`` (steps and updates only when
  ``sync_gradients``)

With fp16 the second micro-step raises "unscale_() has already been called on this optimizer
since the last update()". The maintainer: "you should probably be doing that under an
`if accelerator.sync_gradients:`". The reporter's Trainer class, cut down.
"""
from accelerate import Accelerator


class Trainer:
    def __init__(self, model, optimizer, lr_scheduler, dataloader, args):
        self._accelerator = Accelerator(mixed_precision="fp16",
                                        gradient_accumulation_steps=args.gradient_accumulation_steps)
        self.model, self.optimizer, self.dataloader, self.lr_scheduler = self._accelerator.prepare(
            model, optimizer, dataloader, lr_scheduler)
        self.args = args

    def train_one_epoch(self):
        for step, batch in enumerate(self.dataloader):
            with self._accelerator.accumulate(self.model):
                self.optimizer.zero_grad()
                _, loss = self.model(**batch)
                self._accelerator.backward(loss)
                self._accelerator.clip_grad_norm_(self.model.parameters(), self.args.max_grad_norm)  # expect: PA402 [if sync_gradients]
                self.optimizer.step()
                self.lr_scheduler.step()
