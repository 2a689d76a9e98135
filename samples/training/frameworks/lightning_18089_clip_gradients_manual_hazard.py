"""Lightning #18089: the manual-optimization docs clip with ``self.clip_gradients`` right after
``self.manual_backward(loss)``; under ``precision="16-mixed"`` the gradients are still
multiplied by the loss scale there.

Sources (read):
  https://github.com/Lightning-AI/pytorch-lightning/issues/18089 (open; the docs example below)
  https://github.com/Lightning-AI/pytorch-lightning/pull/16023 (added the example)
  https://github.com/Lightning-AI/pytorch-lightning/pull/19536 (WIP fix, unmerged)
  lightning 2.6.6: plugins/precision/amp.py ``MixedPrecision.clip_gradients`` calls no
  ``unscale_``; ``MixedPrecision.optimizer_step`` unscales after the closure, then calls the
  ``on_before_optimizer_step`` hooks.

"The gradients should be unscaled when using mixed precision training before calling
`self.clip_gradients`." The example, as the docs give it, in a Trainer at 16-mixed.
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

        # compute loss
        loss = self.compute_loss(batch)

        opt.zero_grad()
        self.manual_backward(loss)

        # clip gradients
        self.clip_gradients(opt, gradient_clip_val=0.5, gradient_clip_algorithm="norm")  # expect: PA401

        opt.step()

    def configure_optimizers(self):
        return torch.optim.AdamW(self.parameters(), lr=1e-3)


def main(model, datamodule):
    trainer = L.Trainer(accelerator="gpu", devices=1, precision="16-mixed", max_epochs=10)
    trainer.fit(SimpleModel(model), datamodule=datamodule)
