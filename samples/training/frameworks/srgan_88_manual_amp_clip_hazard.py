"""ESAOpenSR/SRGAN PR #88: "Fix AMP gradient clipping in manual Lightning loop": the
generator and discriminator steps clip with torch's ``clip_grad_norm_`` after
``self.manual_backward(...)``, on gradients Lightning has not unscaled yet under AMP.

Sources (read):
  https://github.com/ESAOpenSR/SRGAN/pull/88 ("unscale optimizers before clipping gradients in
  manual training loop when AMP is active"; "pass optimizers into the gradient clipping helper")
  https://github.com/Lightning-AI/pytorch-lightning/issues/18089

Shaped after the PR's description (the repo's module could not be read): a clipping helper
called between each ``manual_backward`` and the optimizer's ``step()``, the precision from the
training config.
"""
import pytorch_lightning as pl
import torch


class SRGAN(pl.LightningModule):
    def __init__(self, generator, discriminator, config):
        super().__init__()
        self.generator, self.discriminator, self.config = generator, discriminator, config
        self.automatic_optimization = False

    def _clip(self, module):
        if self.config.gradient_clip_val > 0:
            torch.nn.utils.clip_grad_norm_(module.parameters(), self.config.gradient_clip_val)  # expect: PA401

    def training_step(self, batch, batch_idx):
        lr, hr = batch
        opt_g, opt_d = self.optimizers()
        sr = self.generator(lr)
        g_loss = self.content_loss(sr, hr) + self.adversarial_loss(self.discriminator(sr), True)
        opt_g.zero_grad()
        self.manual_backward(g_loss)
        self._clip(self.generator)
        opt_g.step()
        d_loss = self.adversarial_loss(self.discriminator(hr), True) + self.adversarial_loss(
            self.discriminator(sr.detach()), False)
        opt_d.zero_grad()
        self.manual_backward(d_loss)
        self._clip(self.discriminator)
        opt_d.step()


def train(config, model, data):
    trainer = pl.Trainer(accelerator="gpu", precision="16-mixed", max_epochs=config.max_epochs)
    trainer.fit(model, data)
