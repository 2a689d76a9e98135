"""Lightning #19695 "Manual optimisation and AMP": three optimizers stepped by hand under
``precision="16-mixed"``, with ``loss.backward()`` where the LightningModule must call
``self.manual_backward(loss)``.

Sources (read):
  https://github.com/Lightning-AI/pytorch-lightning/issues/19695 ("I get an error when I run
  manual optimisation (multiple optimisers) with `trainer.precision='16-mixed'` on CUDA:
  AssertionError: Attempted unscale_ but _scale is None. This may indicate your script did not
  use scaler.scale(loss or outputs) earlier in the iteration"; three optimisers, each a
  ``torch.optim.Adam`` with a ``ReduceLROnPlateau`` schedule; the reporter's resolution: "this
  was a problem with me using `loss.backward()` instead of `manual_backward(loss)`")
  lightning 2.6.6 core/optimizer.py ``LightningOptimizer.step`` -> plugins/precision/amp.py
  ``MixedPrecision.optimizer_step``: ``scaler.unscale_(optimizer)``; only
  ``LightningModule.manual_backward`` -> ``MixedPrecision.pre_backward`` scales the loss.

The reporter's code is not in the thread; this is the setup it describes (three models, three
Adam optimizers with ReduceLROnPlateau, manual optimization at 16-mixed), cut down.
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
        enc_loss.backward()
        opt_enc.step()  # expect: PA402

        rec_loss = F.mse_loss(self.decoder(z.detach()), x)
        opt_dec.zero_grad()
        rec_loss.backward()
        opt_dec.step()  # expect: PA402

        critic_loss = F.cross_entropy(self.critic(z.detach()), y)
        opt_critic.zero_grad()
        critic_loss.backward()
        opt_critic.step()  # expect: PA402
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
