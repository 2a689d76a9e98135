"""EveryDream2trainer PR #175, fixed as merged (commit 1939cd5): the clip moves into the
iteration that steps, after ``self.scaler.unscale_(optimizer)`` for each optimizer, so it sees
the accumulated, unscaled gradients.

Sources (read):
  https://github.com/victorchall/EveryDream2trainer/pull/175 ("this PR makes
  `--clip_grad_scale` operate on the unscaled gradients instead")
  optimizer/optimizers.py ``EveryDreamOptimizer.step`` at 1939cd5

The PR kept ``torch.cuda.amp`` (deprecated since torch 2.4, after the PR): residual PA409.
"""
import torch
import torch.nn.functional as F
from torch.cuda.amp import autocast, GradScaler


class EveryDreamOptimizer():
    def __init__(self, args, text_encoder, unet, epoch_len):
        self.epoch_len = epoch_len
        self.grad_accum = args.grad_accum
        self.clip_grad_norm = args.clip_grad_norm
        self.text_encoder_params = text_encoder.parameters()
        self.unet_params = unet.parameters()
        self.optimizer_te = torch.optim.AdamW(self.text_encoder_params, lr=args.lr_te)
        self.optimizer_unet = torch.optim.AdamW(self.unet_params, lr=args.lr)
        self.optimizers = [self.optimizer_te, self.optimizer_unet]
        self.scaler = GradScaler(  # residual: PA409
            enabled=args.amp,
            init_scale=2**17.5,
            growth_factor=2,
            backoff_factor=1.0/2,
            growth_interval=25,
        )

    def step(self, loss, step, global_step):
        self.scaler.scale(loss).backward()

        if ((global_step + 1) % self.grad_accum == 0) or (step == self.epoch_len - 1):
            if self.clip_grad_norm is not None:
                for optimizer in self.optimizers:
                    self.scaler.unscale_(optimizer)
                torch.nn.utils.clip_grad_norm_(parameters=self.unet_params, max_norm=self.clip_grad_norm)
                torch.nn.utils.clip_grad_norm_(parameters=self.text_encoder_params, max_norm=self.clip_grad_norm)

            for optimizer in self.optimizers:
                self.scaler.step(optimizer)

            self.scaler.update()
            self._zero_grad(set_to_none=True)

    def _zero_grad(self, set_to_none=False):
        for optimizer in self.optimizers:
            optimizer.zero_grad(set_to_none=set_to_none)


def train(args, unet, text_encoder, train_dataloader, epoch_len, get_noisy_latents_and_target):
    ed_optimizer = EveryDreamOptimizer(args, text_encoder, unet, epoch_len)
    global_step = 0
    for epoch in range(args.max_epochs):
        for step, batch in enumerate(train_dataloader):
            noisy_latents, timesteps, encoder_hidden_states, target = get_noisy_latents_and_target(batch)
            with autocast(enabled=args.amp):  # residual: PA409
                model_pred = unet(noisy_latents, timesteps, encoder_hidden_states).sample
            loss = F.mse_loss(model_pred.float(), target.float(), reduction="mean")
            ed_optimizer.step(loss, step, global_step)
            global_step += 1
