"""decoderesearch/SAELens PR #723, fixed: no GradScaler under bf16 autocast.

Sources (read):
  https://github.com/decoderesearch/SAELens/pull/723 (merged)
  https://github.com/decoderesearch/SAELens/blob/main/sae_lens/training/sae_trainer.py

"bfloat16 has the same exponent range as fp32 ... Nothing underflows, so there is nothing to
scale." The step is a plain ``backward`` / ``clip_grad_norm_`` / ``optimizer.step()``.
"""
import contextlib

import torch
from torch.optim import Adam


class SAETrainer:
    def __init__(self, cfg, sae, data_provider):
        self.cfg = cfg
        self.sae = sae
        self.data_provider = data_provider
        self.optimizer = Adam(sae.parameters(), lr=cfg.lr, betas=(cfg.adam_beta1, cfg.adam_beta2))
        device_type = torch.device(self.cfg.device).type
        if self.cfg.autocast:
            self.autocast_if_enabled = torch.autocast(device_type=device_type, dtype=torch.bfloat16, enabled=self.cfg.autocast)
        else:
            self.autocast_if_enabled = contextlib.nullcontext()

    def fit(self):
        self.sae.to(self.cfg.device)
        for _ in range(self.cfg.total_training_steps):
            self._train_step(sae=self.sae, sae_in=next(self.data_provider))
        return self.sae

    def _train_step(self, sae, sae_in):
        sae.train()
        with self.autocast_if_enabled:
            train_step_output = self.sae.training_forward_pass(sae_in)

        train_step_output.loss.backward()
        torch.nn.utils.clip_grad_norm_(sae.parameters(), 1.0)
        self.optimizer.step()

        self.optimizer.zero_grad()
        return train_step_output
