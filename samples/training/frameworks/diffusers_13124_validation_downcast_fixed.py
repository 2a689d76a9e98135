"""diffusers #13124, fixed as PR #13895 merged it: ``log_validation`` moves the pipeline to
the device without a dtype, so the shared U-Net keeps its fp32 LoRA parameters (as
``train_dreambooth_lora_sdxl.py`` already did, PR #10889).

Sources (read):
  https://github.com/huggingface/diffusers/issues/13124
  https://github.com/huggingface/diffusers/pull/13895 (e377c0a4ab: "Drop the dtype cast from that
  `.to(...)` so the shared `unet` keeps its fp32 LoRA params")
"""
import torch
import torch.nn.functional as F
from accelerate import Accelerator
from diffusers import DiffusionPipeline, DPMSolverMultistepScheduler, UNet2DConditionModel
from diffusers.training_utils import cast_training_params
from peft import LoraConfig


def log_validation(pipeline, args, accelerator, pipeline_args, epoch, torch_dtype):
    pipeline.scheduler = DPMSolverMultistepScheduler.from_config(pipeline.scheduler.config)
    # Don't pass `dtype` here: under fp16 the trainable LoRA params are kept in fp32 and the
    # validation pipeline shares the training `unet` (PR #13895)
    pipeline = pipeline.to(accelerator.device)
    pipeline.set_progress_bar_config(disable=True)
    generator = torch.Generator(device=accelerator.device).manual_seed(args.seed)
    images = []
    for _ in range(args.num_validation_images):
        with torch.amp.autocast(accelerator.device.type):
            images.append(pipeline(**pipeline_args, generator=generator).images[0])
    return images


def main(args, train_dataloader, encode_batch):
    accelerator = Accelerator(gradient_accumulation_steps=args.gradient_accumulation_steps,
                              mixed_precision=args.mixed_precision)
    unet = UNet2DConditionModel.from_pretrained(args.pretrained_model_name_or_path, subfolder="unet")
    unet.requires_grad_(False)
    weight_dtype = torch.float32
    if accelerator.mixed_precision == "fp16":
        weight_dtype = torch.float16
    elif accelerator.mixed_precision == "bf16":
        weight_dtype = torch.bfloat16
    unet.to(accelerator.device, dtype=weight_dtype)
    unet_lora_config = LoraConfig(r=args.rank, lora_alpha=args.rank, init_lora_weights="gaussian",
                                  target_modules=["to_k", "to_q", "to_v", "to_out.0"])
    unet.add_adapter(unet_lora_config)
    # Make sure the trainable params are in float32.
    if args.mixed_precision == "fp16":
        # only upcast trainable parameters (LoRA) into fp32
        cast_training_params([unet], dtype=torch.float32)
    params_to_optimize = list(filter(lambda p: p.requires_grad, unet.parameters()))
    optimizer = torch.optim.AdamW(params_to_optimize, lr=args.learning_rate, eps=args.adam_epsilon)
    unet, optimizer, train_dataloader = accelerator.prepare(unet, optimizer, train_dataloader)

    for epoch in range(args.num_train_epochs):
        unet.train()
        for batch in train_dataloader:
            with accelerator.accumulate(unet):
                noisy_latents, timesteps, encoder_hidden_states, target = encode_batch(batch)
                model_pred = unet(noisy_latents, timesteps, encoder_hidden_states).sample
                loss = F.mse_loss(model_pred.float(), target.float(), reduction="mean")
                accelerator.backward(loss)
                if accelerator.sync_gradients:
                    accelerator.clip_grad_norm_(params_to_optimize, args.max_grad_norm)
                optimizer.step()
                optimizer.zero_grad()
        if accelerator.is_main_process and args.validation_prompt is not None:
            pipeline = DiffusionPipeline.from_pretrained(
                args.pretrained_model_name_or_path,
                unet=accelerator.unwrap_model(unet),
                torch_dtype=weight_dtype,
            )
            log_validation(pipeline, args, accelerator, {"prompt": args.validation_prompt}, epoch,
                           torch_dtype=weight_dtype)
