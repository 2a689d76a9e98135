"""Lightning #7078: "ValueError: Attempting to unscale FP16 gradients.": an ArcFace margin
layer makes its weight as ``nn.Parameter(torch.HalfTensor(...))`` inside a model trained with
``precision=16``, whose GradScaler refuses that parameter's fp16 gradient.

Sources (read):
  https://github.com/Lightning-AI/pytorch-lightning/issues/7078 (the reporter's
  ``ArcMarginProduct``)
  lightning 2.6.6 plugins/precision/amp.py ``MixedPrecision.optimizer_step``: ``scaler.unscale_``

The margin layer as posted, in a LightningModule trained at precision 16.
"""
import math

import pytorch_lightning as pl
import torch
import torch.nn as nn
import torch.nn.functional as F


class ArcMarginProduct(nn.Module):
    def __init__(self, in_features, out_features, scale=30.0, margin=0.50, easy_margin=False, ls_eps=0.0):
        super(ArcMarginProduct, self).__init__()
        self.in_features = in_features
        self.out_features = out_features
        self.scale = scale
        self.margin = margin
        self.ls_eps = ls_eps
        self.weight = nn.Parameter(torch.HalfTensor(out_features, in_features))  # expect: PA405
        nn.init.xavier_uniform_(self.weight)
        self.easy_margin = easy_margin
        self.register_buffer("cos_m", torch.tensor(math.cos(margin)))
        self.register_buffer("sin_m", torch.tensor(math.sin(margin)))

    def forward(self, input, label):
        cosine = F.linear(F.normalize(input), F.normalize(self.weight))
        sine = torch.sqrt(1.0 - torch.pow(cosine, 2)).to(cosine.dtype)
        phi = cosine * self.cos_m - sine * self.sin_m
        return torch.where(cosine > 0, phi, cosine) * self.scale


class Model(pl.LightningModule):
    def __init__(self, backbone, num_classes):
        super().__init__()
        self.backbone = backbone
        self.margin = ArcMarginProduct(512, num_classes)

    def training_step(self, batch, batch_idx):
        x, y = batch
        return F.cross_entropy(self.margin(self.backbone(x), y), y)

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=1e-3)


def main(backbone, data):
    trainer = pl.Trainer(gpus=1, precision=16)
    trainer.fit(Model(backbone, 1000), data)
