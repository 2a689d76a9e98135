"""diffusers #6442, fixed by PR #6231 / #6514: the trainable (LoRA) parameters are cast back to
fp32 with ``cast_training_params`` under fp16.

Sources (read):
  https://github.com/huggingface/diffusers/issues/6442 ("You'll need to cast the torch.float16
  to torch.float32 for trainable parameters"; fixed by PR #6231 / #6514:
  ``cast_training_params(unet, dtype=torch.float32)``)
  accelerate 1.15.0 ``Accelerator.clip_grad_norm_`` -> ``unscale_gradients`` -> ``scaler.unscale_``

examples/dreambooth/train_dreambooth_lora_sdxl.py's set-up after the PRs, cut down.
"""
import torch
from accelerate import Accelerator
from diffusers import UNet2DConditionModel
from diffusers.training_utils import cast_training_params
from peft import LoraConfig


def main(args):
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
    if args.mixed_precision == "fp16":
        cast_training_params(unet, dtype=torch.float32)  # only the LoRA parameters train: fp32
    params_to_optimize = list(filter(lambda p: p.requires_grad, unet.parameters()))
    optimizer = torch.optim.AdamW(params_to_optimize, lr=args.learning_rate)
    unet, optimizer = accelerator.prepare(unet, optimizer)
    return unet, optimizer
