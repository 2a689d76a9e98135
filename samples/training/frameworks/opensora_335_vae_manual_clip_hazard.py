"""Open-Sora-Plan #335: "A bug in FP16 training of VAE": the causal VAE's GAN step in manual
optimization clips with ``self.clip_gradients`` after ``self.manual_backward(aeloss)``, so under
16-bit mixed precision it clips gradients still multiplied by the loss scale.

Sources (read):
  https://github.com/PKU-YuanGroup/Open-Sora-Plan/issues/335 (quotes
  ``CausalVAEModel._training_step_gan`` in opensora/models/ae/videobase/causal_vae/modeling_causalvae.py)
  https://github.com/Lightning-AI/pytorch-lightning/issues/18089

"If we enable mixed precision, `self.manual_backward(aeloss)` will scale the loss ... before
gradient clipping, we need to unscale the gradient. But the current code lacks this step."
Cut down to the two optimizers' steps as the issue quotes them; the Trainer as the repo's
training script builds it (``precision=16``).
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
        # autoencoder
        aeloss, log_dict_ae = self.loss(inputs, reconstructions, posterior, optimizer_idx=0,
                                        global_step=self.global_step, last_layer=self.get_last_layer())
        opt1.zero_grad()
        self.manual_backward(aeloss)
        self.clip_gradients(opt1, gradient_clip_val=1, gradient_clip_algorithm="norm")  # expect: PA401
        opt1.step()
        # discriminator
        discloss, log_dict_disc = self.loss(inputs, reconstructions, posterior, optimizer_idx=1,
                                            global_step=self.global_step, last_layer=self.get_last_layer())
        opt2.zero_grad()
        self.manual_backward(discloss)
        self.clip_gradients(opt2, gradient_clip_val=1, gradient_clip_algorithm="norm")  # expect: PA401
        opt2.step()


def train(model, data):
    trainer = pl.Trainer(accelerator="gpu", precision=16, max_steps=100000)
    trainer.fit(model, data)
