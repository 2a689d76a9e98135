"""Lightning #18089, fixed: the clip moves into ``on_before_optimizer_step``, which
``opt.step()`` calls after ``MixedPrecision.optimizer_step`` has unscaled the gradients.

Sources (read):
  https://github.com/Lightning-AI/pytorch-lightning/issues/18089
  lightning 2.6.6 plugins/precision/amp.py ``MixedPrecision.optimizer_step``:
  ``scaler.unscale_(optimizer)``, then ``self._after_closure`` (the ``on_before_optimizer_step``
  hooks, in manual optimization too), then ``scaler.step`` and ``scaler.update``.

The issue is open and PR #19536 (unscale inside ``clip_gradients``) is not merged; this twin is
the hook Lightning documents as seeing unscaled gradients.
"""
import lightning as L
import torch


class SimpleModel(L.LightningModule):
    def __init__(self, model):
        super().__init__()
        self.model = model
        self.automatic_optimization = False

    def compute_loss(self, batch):
        x, y = batch
        return torch.nn.functional.cross_entropy(self.model(x), y)

    def training_step(self, batch, batch_idx):
        opt = self.optimizers()
        loss = self.compute_loss(batch)
        opt.zero_grad()
        self.manual_backward(loss)
        opt.step()

    def on_before_optimizer_step(self, optimizer):
        # called inside opt.step(), after Lightning unscaled the gradients
        self.clip_gradients(optimizer, gradient_clip_val=0.5, gradient_clip_algorithm="norm")

    def configure_optimizers(self):
        return torch.optim.AdamW(self.parameters(), lr=1e-3)


def main(model, datamodule):
    trainer = L.Trainer(accelerator="gpu", devices=1, precision="16-mixed", max_epochs=10)
    trainer.fit(SimpleModel(model), datamodule=datamodule)
