"""LAVIS #279, fixed as the maintainer said: with ``freeze_vit`` False the ViT is built with
``vit_precision="fp32"``, so the runner's GradScaler steps fp32 weights.

Sources (read):
  https://github.com/salesforce/LAVIS/issues/279 ("when setting freeze_vit to False, you also
  need to set vit_precision to fp32")

The runner kept ``torch.cuda.amp`` (deprecated since torch 2.4): residual PA409.
"""
from functools import partial

import torch
import torch.nn as nn


def convert_weights_to_fp16(model: nn.Module):
    """Convert applicable model parameters to fp16"""

    def _convert_weights_to_fp16(l):
        if isinstance(l, (nn.Conv1d, nn.Conv2d, nn.Linear)):
            l.weight.data = l.weight.data.half()
            if l.bias is not None:
                l.bias.data = l.bias.data.half()

    model.apply(_convert_weights_to_fp16)


def create_eva_vit_g(VisionTransformer, state_dict, img_size=224, drop_path_rate=0.4, use_checkpoint=False,
                     precision="fp16"):
    model = VisionTransformer(img_size=img_size, patch_size=14, embed_dim=1408, depth=39, num_heads=1408 // 88,
                              mlp_ratio=4.3637, qkv_bias=True, drop_path_rate=drop_path_rate,
                              norm_layer=partial(nn.LayerNorm, eps=1e-6), use_checkpoint=use_checkpoint)
    model.load_state_dict(state_dict, strict=False)
    if precision == "fp16":
        convert_weights_to_fp16(model)
    return model


class Blip2Qformer(nn.Module):
    def __init__(self, VisionTransformer, state_dict, img_size=224, vit_precision="fp16", freeze_vit=True):
        super().__init__()
        self.visual_encoder = create_eva_vit_g(VisionTransformer, state_dict, img_size, 0, False, vit_precision)
        self.ln_vision = nn.LayerNorm(self.visual_encoder.num_features)
        if freeze_vit:
            for name, param in self.visual_encoder.named_parameters():
                param.requires_grad = False

    def forward(self, samples):
        return self.ln_vision(self.visual_encoder(samples["image"])).mean()


def train(VisionTransformer, state_dict, data_loader, run_cfg):
    # the maintainer's fix: an unfrozen ViT is trained in fp32
    model = Blip2Qformer(VisionTransformer, state_dict, vit_precision="fp32", freeze_vit=False).cuda()
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=float(run_cfg.init_lr))
    scaler = torch.cuda.amp.GradScaler() if run_cfg.get("amp", False) else None  # residual: PA409
    use_amp = scaler is not None
    for i, samples in enumerate(data_loader):
        with torch.cuda.amp.autocast(enabled=use_amp):  # residual: PA409
            loss = model(samples)
        if use_amp:
            scaler.scale(loss).backward()
        else:
            loss.backward()
        if (i + 1) % run_cfg.accum_grad_iters == 0:
            if use_amp:
                scaler.step(optimizer)
                scaler.update()
            else:
                optimizer.step()
            optimizer.zero_grad()
