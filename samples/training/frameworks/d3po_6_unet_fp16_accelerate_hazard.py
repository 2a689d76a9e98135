"""d3po #6 "ValueError : Attemting to unscale fp16 Gradients": fine-tuning the whole U-Net (LoRA
off) with fp16 AMP, after the U-Net was moved to the inference dtype (fp16).

Sources (read):
  https://github.com/yk7333/d3po/issues/6 (quotes train_with_rm.py: ``pipeline.unet.to(
  accelerator.device, dtype=inference_dtype)``; the fix below, confirmed by a second user)
  accelerate 1.15.0 optimizer.py ``AcceleratedOptimizer.step`` -> ``GradScaler.step``, which
  refuses fp16 gradients

"Obviously, this is caused by the dtype of the parameters and gradients in the u-net module
being fp16". The script's set-up, cut down (config fields as attributes).
"""
import torch
from accelerate import Accelerator
from diffusers import StableDiffusionPipeline
from diffusers.loaders import AttnProcsLayers


def main(config):
    accelerator = Accelerator(mixed_precision=config.mixed_precision,
                              gradient_accumulation_steps=config.train.gradient_accumulation_steps)
    pipeline = StableDiffusionPipeline.from_pretrained(config.pretrained.model, revision=config.pretrained.revision)
    pipeline.vae.requires_grad_(False)
    pipeline.text_encoder.requires_grad_(False)
    inference_dtype = torch.float32
    if accelerator.mixed_precision == "fp16":
        inference_dtype = torch.float16
    elif accelerator.mixed_precision == "bf16":
        inference_dtype = torch.bfloat16
    pipeline.vae.to(accelerator.device, dtype=inference_dtype)
    pipeline.text_encoder.to(accelerator.device, dtype=inference_dtype)
    pipeline.unet.to(accelerator.device, dtype=inference_dtype)  # expect: PA405 [if fp16]
    if config.use_lora:
        trainable = AttnProcsLayers(pipeline.unet.attn_processors)  # the LoRA processors only
    else:
        trainable = pipeline.unet
    optimizer = torch.optim.AdamW(trainable.parameters(), lr=config.train.learning_rate,
                                  betas=(config.train.adam_beta1, config.train.adam_beta2),
                                  weight_decay=config.train.adam_weight_decay, eps=config.train.adam_epsilon)
    trainable, optimizer = accelerator.prepare(trainable, optimizer)
    return trainable, optimizer
