"""decoderesearch/SAELens PR #723: "remove the unused GradScaler from SAETrainer".

Sources (read):
  https://github.com/decoderesearch/SAELens/pull/723 (merged)
  sae_lens/training/sae_trainer.py before the PR (read from the code index: the scaler lines
  below are quoted from it)

"``SAETrainer`` constructs a ``torch.amp.GradScaler`` and routes every training step through
scale / unscale_ / step / update ... SAELens never autocasts to fp16 - all three autocast
sites hardcode bfloat16 ... It can silently skip optimizer steps when its inf check trips ...
With ``autocast=True`` on an SAE holding bfloat16 parameters it raises: NotImplementedError:
"_amp_foreach_non_finite_check_and_unscale_cuda" not implemented for 'BFloat16'". Cut
down from the pre-PR file. The finding should name the condition "when cfg.autocast is set".
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
        # Setup autocast if using
        self.grad_scaler = torch.amp.GradScaler(device=self.cfg.device, enabled=self.cfg.autocast)  # expect: PA404 [if autocast]
        if self.cfg.autocast:
            self.autocast_if_enabled = torch.autocast(device_type=self.cfg.device, dtype=torch.bfloat16, enabled=self.cfg.autocast)
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

        # Grad scaler will rescale gradients if autocast is enabled
        self.grad_scaler.scale(train_step_output.loss).backward()  # loss.backward() if not autocasting
        self.grad_scaler.unscale_(self.optimizer)  # needed to clip correctly
        torch.nn.utils.clip_grad_norm_(sae.parameters(), 1.0)
        self.grad_scaler.step(self.optimizer)
        self.grad_scaler.update()

        self.optimizer.zero_grad()
        return train_step_output
