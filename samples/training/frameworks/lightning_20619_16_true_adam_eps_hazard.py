"""Lightning #20619 "16 bit precision in Trainer leading to NaN": under a pure 16-bit
``Trainer(precision="16-true")`` the parameters are fp16, and Adam's default ``eps=1e-8`` rounds
to 0 there: "it was updating all my parameters to NaN in the very first step, even when
learning rate was set to 0".

Sources (read):
  https://github.com/Lightning-AI/pytorch-lightning/issues/20619 ("small float values ... can be
  round up to zero (in input batches, model parameters and its gradients, optimizer
  hyper-parameters) leading to NaN"; "the very commonly used Adam optimizer (with default
  eps=1e-8 ...)")
  https://github.com/Lightning-AI/pytorch-lightning/pull/21295 (fixes #20619: the precision
  docs now warn "Values like Adam's default ``eps=1e-8`` become zero, which can cause NaN during
  training. Increase ``eps`` to 1e-4 or higher")
  lightning 2.6.6 plugins/precision/half.py ``HalfPrecision.convert_module``: "16-true" converts
  the module to float16 before ``configure_optimizers`` builds the optimizer over it.

The reporter's module is not in the thread; the setup it describes (a LightningModule whose
``configure_optimizers`` returns a default Adam, trained at 16-bit precision with fp16
parameters) is written as the precision docs write it.
"""
import lightning as L
import torch


class Regressor(L.LightningModule):
    def __init__(self, net):
        super().__init__()
        self.net = net

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = torch.nn.functional.mse_loss(self.net(x), y)
        self.log("train_loss", loss)
        return loss

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=1e-3)  # expect: PA406, PA407


def main(net, datamodule):
    trainer = L.Trainer(accelerator="gpu", devices=1, precision="16-true", max_epochs=10)
    trainer.fit(Regressor(net), datamodule=datamodule)
