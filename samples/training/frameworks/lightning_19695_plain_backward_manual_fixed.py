"""Lightning #19695, fixed: each loss goes through ``self.manual_backward(loss)``, which scales
it as ``opt.step()`` expects (the reporter's own resolution).

Sources (read):
  https://github.com/Lightning-AI/pytorch-lightning/issues/19695 ("this was a problem with me
  using `loss.backward()` instead of `manual_backward(loss)`")
  lightning 2.6.6 core/module.py ``LightningModule.manual_backward`` -> plugins/precision/amp.py
  ``MixedPrecision.pre_backward``: ``scaler.scale(tensor)``; each ``opt.step()`` then unscales,
  steps and updates the scale for its own gradients, scaled after the previous update.
"""
import lightning as L
import torch
import torch.nn.functional as F


class ThreeOptimizerModule(L.LightningModule):
    def __init__(self, encoder, decoder, critic):
        super().__init__()
        self.encoder = encoder
        self.decoder = decoder
        self.critic = critic
        self.automatic_optimization = False

    def training_step(self, batch, batch_idx):
        opt_enc, opt_dec, opt_critic = self.optimizers()
        x, y = batch

        z = self.encoder(x)
        enc_loss = F.cross_entropy(self.critic(z), y)
        opt_enc.zero_grad()
        self.manual_backward(enc_loss)
        opt_enc.step()

        rec_loss = F.mse_loss(self.decoder(z.detach()), x)
        opt_dec.zero_grad()
        self.manual_backward(rec_loss)
        opt_dec.step()

        critic_loss = F.cross_entropy(self.critic(z.detach()), y)
        opt_critic.zero_grad()
        self.manual_backward(critic_loss)
        opt_critic.step()
        self.log_dict({"enc": enc_loss, "rec": rec_loss, "critic": critic_loss})

    def on_validation_epoch_end(self):
        for scheduler in self.lr_schedulers():
            scheduler.step(self.trainer.callback_metrics["val_loss"])

    def configure_optimizers(self):
        optimizers = [torch.optim.Adam(self.encoder.parameters(), lr=1e-3),
                      torch.optim.Adam(self.decoder.parameters(), lr=1e-3),
                      torch.optim.Adam(self.critic.parameters(), lr=1e-3)]
        schedulers = [torch.optim.lr_scheduler.ReduceLROnPlateau(o) for o in optimizers]
        return optimizers, schedulers


def main(encoder, decoder, critic, datamodule):
    trainer = L.Trainer(accelerator="cuda", devices=1, precision="16-mixed", max_epochs=50)
    trainer.fit(ThreeOptimizerModule(encoder, decoder, critic), datamodule=datamodule)
