"""pytorch/examples #1196: minGPT-ddp clips gradients that are still scaled.

Source (read): https://github.com/pytorch/examples/issues/1196
File (read):   https://github.com/pytorch/examples/blob/main/distributed/minGPT-ddp/mingpt/trainer.py

"add scaler.unscale_(optimizer) before clip_grad_norm_ ... according to
https://pytorch.org/docs/stable/amp.html#torch.cuda.amp.GradScaler.unscale_, we should add
unscale before it when we need to modify or inspect gradients". The example's ``_run_batch``
calls ``clip_grad_norm_`` right after ``self.scaler.scale(loss).backward()`` when
``use_amp`` is set, so the clip threshold is compared with the scaled norm. The finding
should name the condition "when use_amp is set". Cut down from the file above.
"""
from dataclasses import dataclass

import torch
from torch.nn.parallel import DistributedDataParallel as DDP


@dataclass
class TrainerConfig:
    max_epochs: int = None
    grad_norm_clip: float = None
    use_amp: bool = None


class Trainer:
    def __init__(self, trainer_config: TrainerConfig, model, optimizer, train_loader, local_rank):
        self.config = trainer_config
        self.local_rank = local_rank
        self.train_loader = train_loader
        self.model = model.to(local_rank)
        self.optimizer = optimizer
        if self.config.use_amp:
            self.scaler = torch.cuda.amp.GradScaler()  # expect: PA409
        self.model = DDP(self.model, device_ids=[local_rank])

    def _run_batch(self, source, targets, train: bool = True) -> float:
        with torch.set_grad_enabled(train), torch.amp.autocast(device_type="cuda", dtype=torch.float16, enabled=(self.config.use_amp)):
            _, loss = self.model(source, targets)

        if train:
            self.optimizer.zero_grad(set_to_none=True)
            if self.config.use_amp:
                self.scaler.scale(loss).backward()
                torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.config.grad_norm_clip)  # expect: PA401 [if use_amp]
                self.scaler.step(self.optimizer)
                self.scaler.update()
            else:
                loss.backward()
                torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.config.grad_norm_clip)
                self.optimizer.step()
        return loss.item()

    def _run_epoch(self, epoch: int, dataloader, train: bool = True):
        dataloader.sampler.set_epoch(epoch)
        for source, targets in dataloader:
            source = source.to(self.local_rank)
            targets = targets.to(self.local_rank)
            self._run_batch(source, targets, train)

    def train(self):
        for epoch in range(self.config.max_epochs):
            self._run_epoch(epoch, self.train_loader, train=True)
