"""EveryDream2trainer PR #175 "correctly apply `clip_grad_scale` to unscaled gradients": the
trainer (diffusers' U-Net and CLIP text encoder, torch AMP) clipped both models' gradients on
every micro-step while they were still multiplied by the GradScaler's scale.

Sources (read):
  https://github.com/victorchall/EveryDream2trainer/pull/175 ("currently, if you're using AMP
  clip_grad_scale is applied to the scaled gradients. this means that you have to pass values
  like `1e5` or `1e6` ... rather than the common/expected `1.0`"; "instead of effectively
  halting training")
  optimizer/optimizers.py ``EveryDreamOptimizer`` at 1939cd5^ (before the PR's commit) and
  train.py (the loop: ``autocast(enabled=args.amp)`` around the U-Net,
  ``ed_optimizer.step(loss, step, global_step)``)

``EveryDreamOptimizer`` and the loop, cut down (the optimizer configs, schedulers and the
text-encoder freezing left out).
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
        self.scaler = GradScaler(  # expect: PA409
            enabled=args.amp,
            init_scale=2**17.5,
            growth_factor=2,
            backoff_factor=1.0/2,
            growth_interval=25,
        )

    def step(self, loss, step, global_step):
        self.scaler.scale(loss).backward()

        if self.clip_grad_norm is not None:
            torch.nn.utils.clip_grad_norm_(parameters=self.unet_params, max_norm=self.clip_grad_norm)  # expect: PA401 [if amp]
            torch.nn.utils.clip_grad_norm_(parameters=self.text_encoder_params, max_norm=self.clip_grad_norm)  # expect: PA401 [if amp]
        if ((global_step + 1) % self.grad_accum == 0) or (step == self.epoch_len - 1):
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
            with autocast(enabled=args.amp):  # expect: PA409
                model_pred = unet(noisy_latents, timesteps, encoder_hidden_states).sample
            loss = F.mse_loss(model_pred.float(), target.float(), reduction="mean")
            ed_optimizer.step(loss, step, global_step)
            global_step += 1
