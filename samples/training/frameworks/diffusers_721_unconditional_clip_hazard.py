"""diffusers PR #721 "[train_unconditional] fix applying clip_grad_norm_" (fixes #499): the
unconditional example clipped on every micro-step of ``accelerator.accumulate``.

Sources (read):
  https://github.com/huggingface/diffusers/pull/721 ("The gradients needs to clipped after they
  are synchronized when doing accumulation. cf huggingface/accelerate#641"; "not sure why it only
  got triggered only in half-precision": accelerate unscales only under fp16)
  https://github.com/huggingface/diffusers/issues/499

examples/unconditional_image_generation/train_unconditional.py's loop before the PR, cut down.
"""
import argparse

import torch
import torch.nn.functional as F
from accelerate import Accelerator


def main(args, model, noise_scheduler, optimizer, lr_scheduler, train_dataloader):
    accelerator = Accelerator(gradient_accumulation_steps=args.gradient_accumulation_steps,
                              mixed_precision=args.mixed_precision, log_with="tensorboard", logging_dir="logs")
    model, optimizer, train_dataloader, lr_scheduler = accelerator.prepare(
        model, optimizer, train_dataloader, lr_scheduler)
    for epoch in range(args.num_epochs):
        model.train()
        for step, batch in enumerate(train_dataloader):
            clean_images = batch["input"]
            noise = torch.randn(clean_images.shape).to(clean_images.device)
            timesteps = torch.randint(0, noise_scheduler.num_train_timesteps, (clean_images.shape[0],),
                                      device=clean_images.device).long()
            noisy_images = noise_scheduler.add_noise(clean_images, noise, timesteps)
            with accelerator.accumulate(model):
                noise_pred = model(noisy_images, timesteps).sample
                loss = F.mse_loss(noise_pred, noise)
                accelerator.backward(loss)
                accelerator.clip_grad_norm_(model.parameters(), 1.0)  # expect: PA402 [if fp16|mixed_precision]
                optimizer.step()
                lr_scheduler.step()
                optimizer.zero_grad()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--gradient_accumulation_steps", type=int, default=1)
    parser.add_argument("--mixed_precision", type=str, default="no", choices=["no", "fp16", "bf16"])
    parser.add_argument("--num_epochs", type=int, default=100)
    main(parser.parse_args(), None, None, None, None, None)
