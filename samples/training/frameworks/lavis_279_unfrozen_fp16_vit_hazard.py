"""LAVIS #279 "Maybe a bug? ValueError: Attempting to unscale FP16 gradients.": BLIP-2 builds
its EVA ViT with ``vit_precision="fp16"`` (the weights of every Conv/Linear made half by
``convert_weights_to_fp16``), which is right while the ViT is frozen; with ``freeze_vit:
False`` those fp16 weights are trained by LAVIS's runner under ``amp: True`` and its
GradScaler refuses their gradients.

Sources (read):
  https://github.com/salesforce/LAVIS/issues/279 ("When I set freeze_vit to False, there
  raises: ValueError: Attempting to unscale FP16 gradients"; the maintainer: "when setting
  freeze_vit to False, you also need to set vit_precision to fp32")
  LAVIS at 8491f1d: lavis/models/eva_vit.py (``convert_weights_to_fp16``, ``create_eva_vit_g``),
  lavis/models/blip2_models/blip2_qformer.py ``Blip2Qformer.__init__`` (``vit_precision="fp16"``,
  ``freeze_vit``), lavis/runners/runner_base.py (``torch.cuda.amp.GradScaler()`` when
  ``run_cfg.amp``, ``torch.optim.AdamW`` over the parameters that require grad),
  lavis/tasks/base_task.py ``_train_inner_loop`` (the scaled step)

The three files cut down to one (the Q-Former, the data and the schedule left out).
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
        convert_weights_to_fp16(model)  # expect: PA405
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
    # the user's config: freeze_vit: False, vit_precision left at its default
    model = Blip2Qformer(VisionTransformer, state_dict, vit_precision="fp16", freeze_vit=False).cuda()
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=float(run_cfg.init_lr))
    scaler = torch.cuda.amp.GradScaler() if run_cfg.get("amp", False) else None  # expect: PA409
    use_amp = scaler is not None
    for i, samples in enumerate(data_loader):
        with torch.cuda.amp.autocast(enabled=use_amp):  # expect: PA409
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
