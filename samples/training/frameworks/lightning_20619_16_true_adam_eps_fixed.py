"""Lightning #20619, fixed as Lightning's docs now say (PR #21295): under "16-true" Adam's
``eps`` is raised to 1e-4, which float16 represents.

Sources (read):
  https://github.com/Lightning-AI/pytorch-lightning/issues/20619
  https://github.com/Lightning-AI/pytorch-lightning/pull/21295 ("Increase ``eps`` to 1e-4 or
  higher"; the same note points to "bf16-mixed"/"bf16-true" for a wider range)

The parameters are still fp16 and Adam still updates them with no fp32 master copy: that
hazard (PA407) is what pure 16-bit training is, and the fix left it.
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
        return torch.optim.Adam(self.parameters(), lr=1e-3, eps=1e-4)  # residual: PA407


def main(net, datamodule):
    trainer = L.Trainer(accelerator="gpu", devices=1, precision="16-true", max_epochs=10)
    trainer.fit(Regressor(net), datamodule=datamodule)
