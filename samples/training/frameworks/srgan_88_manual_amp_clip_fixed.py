"""ESAOpenSR/SRGAN PR #88, fixed: each optimizer's gradients clipped after Lightning
unscaled them.

Sources (read):
  https://github.com/ESAOpenSR/SRGAN/pull/88
  lightning 2.6.6 plugins/precision/amp.py ``MixedPrecision.optimizer_step``

The PR unscales the optimizers itself before clipping; an ``unscale_`` in ``training_step``
makes the one in ``opt.step()`` raise ("unscale_() has already been called on this optimizer
since the last update()") when it is given the same optimizer. The twin clips in
``on_before_optimizer_step``, after Lightning's own ``unscale_``.
"""
import pytorch_lightning as pl
import torch


class SRGAN(pl.LightningModule):
    def __init__(self, generator, discriminator, config):
        super().__init__()
        self.generator, self.discriminator, self.config = generator, discriminator, config
        self.automatic_optimization = False

    def training_step(self, batch, batch_idx):
        lr, hr = batch
        opt_g, opt_d = self.optimizers()
        sr = self.generator(lr)
        g_loss = self.content_loss(sr, hr) + self.adversarial_loss(self.discriminator(sr), True)
        opt_g.zero_grad()
        self.manual_backward(g_loss)
        opt_g.step()
        d_loss = self.adversarial_loss(self.discriminator(hr), True) + self.adversarial_loss(
            self.discriminator(sr.detach()), False)
        opt_d.zero_grad()
        self.manual_backward(d_loss)
        opt_d.step()

    def on_before_optimizer_step(self, optimizer):
        if self.config.gradient_clip_val > 0:
            params = [p for group in optimizer.param_groups for p in group["params"]]
            torch.nn.utils.clip_grad_norm_(params, self.config.gradient_clip_val)


def train(config, model, data):
    trainer = pl.Trainer(accelerator="gpu", precision="16-mixed", max_epochs=config.max_epochs)
    trainer.fit(model, data)
