"""accelerate #641, fixed: the clip only on the micro-steps that sync (and step).

Sources (read):
  https://github.com/huggingface/accelerate/issues/641 (maintainer: "under an
  `if accelerator.sync_gradients:`")
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
                if self._accelerator.sync_gradients:
                    self._accelerator.clip_grad_norm_(self.model.parameters(), self.args.max_grad_norm)
                self.optimizer.step()
                self.lr_scheduler.step()
