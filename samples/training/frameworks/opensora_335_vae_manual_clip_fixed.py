"""Open-Sora-Plan #335, fixed: clipped where Lightning has unscaled the gradients.

Sources (read):
  https://github.com/PKU-YuanGroup/Open-Sora-Plan/issues/335 (the maintainers "abandoned pytorch
  lightning training"; the issue's proposed ``self.unscale_gradients()`` is no Lightning API)
  https://github.com/Lightning-AI/pytorch-lightning/issues/18089

The twin keeps Lightning and clips in ``on_before_optimizer_step``, which each ``opt.step()``
calls after ``MixedPrecision.optimizer_step`` unscaled that optimizer's gradients.
"""
import pytorch_lightning as pl


class CausalVAEModel(pl.LightningModule):
    def __init__(self, encoder, decoder, loss):
        super().__init__()
        self.encoder, self.decoder, self.loss = encoder, decoder, loss
        self.automatic_optimization = False

    def training_step(self, batch, batch_idx):
        opt1, opt2 = self.optimizers()
        inputs = batch["video"]
        reconstructions, posterior = self(inputs)
        aeloss, log_dict_ae = self.loss(inputs, reconstructions, posterior, optimizer_idx=0,
                                        global_step=self.global_step, last_layer=self.get_last_layer())
        opt1.zero_grad()
        self.manual_backward(aeloss)
        opt1.step()
        discloss, log_dict_disc = self.loss(inputs, reconstructions, posterior, optimizer_idx=1,
                                            global_step=self.global_step, last_layer=self.get_last_layer())
        opt2.zero_grad()
        self.manual_backward(discloss)
        opt2.step()

    def on_before_optimizer_step(self, optimizer):
        self.clip_gradients(optimizer, gradient_clip_val=1, gradient_clip_algorithm="norm")


def train(model, data):
    trainer = pl.Trainer(accelerator="gpu", precision=16, max_steps=100000)
    trainer.fit(model, data)
