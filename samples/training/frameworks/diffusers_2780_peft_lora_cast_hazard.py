"""diffusers #2780 (PR #2795): "ValueError: Attempting to unscale FP16 gradients" in
``examples/research_projects/lora/train_text_to_image_lora.py`` with ``--use_peft`` and
``--mixed_precision="fp16"``: the U-Net (and the text encoder) are wrapped in PEFT's
``LoraModel`` and only then moved to ``weight_dtype``, which casts the LoRA parameters the
optimizer trains to fp16 as well; accelerate's GradScaler refuses their gradients.

Sources (read):
  https://github.com/huggingface/diffusers/issues/2780 (the command: ``--mixed_precision="fp16"``
  ``--use_peft`` ``--lora_text_encoder_r=4``: "ValueError: Attempting to unscale FP16 gradients")
  https://github.com/huggingface/diffusers/pull/2795 ("For training modules, they are required to
  be in fp32"), merged as 4a98d6e097: the U-Net is no longer cast, the text encoder only when it
  is not trained; the script at its parent (set-up, optimizer, ``accelerator.prepare``, the loop)
  accelerate 1.15.0 ``Accelerator.backward`` / ``clip_grad_norm_`` -> ``scaler.unscale_``

The script at 4a98d6e097^, cut down to the PEFT path.
"""
import itertools

import torch
import torch.nn.functional as F
from accelerate import Accelerator
from diffusers import AutoencoderKL, UNet2DConditionModel
from peft import LoraConfig, LoraModel
from transformers import CLIPTextModel

UNET_TARGET_MODULES = ["to_q", "to_v", "query", "value"]
TEXT_ENCODER_TARGET_MODULES = ["q_proj", "v_proj"]


def main(args, train_dataloader, encode):
    accelerator = Accelerator(gradient_accumulation_steps=args.gradient_accumulation_steps,
                              mixed_precision=args.mixed_precision)
    text_encoder = CLIPTextModel.from_pretrained(args.pretrained_model_name_or_path, subfolder="text_encoder")
    vae = AutoencoderKL.from_pretrained(args.pretrained_model_name_or_path, subfolder="vae")
    unet = UNet2DConditionModel.from_pretrained(args.pretrained_model_name_or_path, subfolder="unet")

    # For mixed precision training we cast the text_encoder and vae weights to half-precision
    # as these models are only used for inference, keeping weights in full precision is not required.
    weight_dtype = torch.float32
    if accelerator.mixed_precision == "fp16":
        weight_dtype = torch.float16
    elif accelerator.mixed_precision == "bf16":
        weight_dtype = torch.bfloat16

    config = LoraConfig(r=args.lora_r, lora_alpha=args.lora_alpha, target_modules=UNET_TARGET_MODULES)
    unet = LoraModel(config, unet)
    vae.requires_grad_(False)
    if args.train_text_encoder:
        config = LoraConfig(r=args.lora_text_encoder_r, lora_alpha=args.lora_text_encoder_alpha,
                            target_modules=TEXT_ENCODER_TARGET_MODULES)
        text_encoder = LoraModel(config, text_encoder)

    # Move unet, vae and text_encoder to device and cast to weight_dtype
    unet.to(accelerator.device, dtype=weight_dtype)  # expect: PA405 [if fp16]
    vae.to(accelerator.device, dtype=weight_dtype)
    text_encoder.to(accelerator.device, dtype=weight_dtype)  # expect: PA405 [if fp16]

    params_to_optimize = (
        itertools.chain(unet.parameters(), text_encoder.parameters())
        if args.train_text_encoder
        else unet.parameters()
    )
    optimizer = torch.optim.AdamW(params_to_optimize, lr=args.learning_rate, eps=args.adam_epsilon)
    if args.train_text_encoder:
        unet, text_encoder, optimizer, train_dataloader = accelerator.prepare(
            unet, text_encoder, optimizer, train_dataloader)
    else:
        unet, optimizer, train_dataloader = accelerator.prepare(unet, optimizer, train_dataloader)

    for epoch in range(args.num_train_epochs):
        for step, batch in enumerate(train_dataloader):
            with accelerator.accumulate(unet):
                noisy_latents, timesteps, target = encode(vae, batch, weight_dtype)
                encoder_hidden_states = text_encoder(batch["input_ids"])[0]
                model_pred = unet(noisy_latents, timesteps, encoder_hidden_states).sample
                loss = F.mse_loss(model_pred.float(), target.float(), reduction="mean")
                accelerator.backward(loss)
                if accelerator.sync_gradients:
                    params_to_clip = (
                        itertools.chain(unet.parameters(), text_encoder.parameters())
                        if args.train_text_encoder
                        else unet.parameters()
                    )
                    accelerator.clip_grad_norm_(params_to_clip, args.max_grad_norm)
                optimizer.step()
                optimizer.zero_grad()
