"""diffusers PR #686 "[dreambooth] fix applying clip_grad_norm_" (fixes #668), fixed: the clip
under ``if accelerator.sync_gradients:``, as the PR made it.

Sources (read):
  https://github.com/huggingface/diffusers/pull/686 ("The gradients needs to clipped after they
  are synchronized when doing accumulation"; "only got triggered only in half-precision")
  https://github.com/huggingface/diffusers/issues/668
  https://github.com/huggingface/accelerate/issues/641

examples/dreambooth/train_dreambooth.py's loop after the PR, cut down (prior preservation
kept: two losses, one backward).
"""
import itertools

import torch
import torch.nn.functional as F
from accelerate import Accelerator


def main(args, unet, text_encoder, vae, noise_scheduler, optimizer, lr_scheduler, train_dataloader):
    accelerator = Accelerator(gradient_accumulation_steps=args.gradient_accumulation_steps,
                              mixed_precision=args.mixed_precision)
    unet, optimizer, train_dataloader, lr_scheduler = accelerator.prepare(
        unet, optimizer, train_dataloader, lr_scheduler)
    for epoch in range(args.num_train_epochs):
        unet.train()
        for step, batch in enumerate(train_dataloader):
            with accelerator.accumulate(unet):
                latents = vae.encode(batch["pixel_values"]).latent_dist.sample() * 0.18215
                noise = torch.randn_like(latents)
                timesteps = torch.randint(0, noise_scheduler.config.num_train_timesteps, (latents.shape[0],),
                                          device=latents.device).long()
                noisy_latents = noise_scheduler.add_noise(latents, noise, timesteps)
                encoder_hidden_states = text_encoder(batch["input_ids"])[0]
                noise_pred = unet(noisy_latents, timesteps, encoder_hidden_states).sample
                noise_pred, noise_pred_prior = torch.chunk(noise_pred, 2, dim=0)
                noise, noise_prior = torch.chunk(noise, 2, dim=0)
                loss = F.mse_loss(noise_pred, noise, reduction="none").mean([1, 2, 3]).mean()
                prior_loss = F.mse_loss(noise_pred_prior, noise_prior, reduction="none").mean([1, 2, 3]).mean()
                loss = loss + args.prior_loss_weight * prior_loss
                accelerator.backward(loss)
                if accelerator.sync_gradients:
                    params_to_clip = (itertools.chain(unet.parameters(), text_encoder.parameters())
                                      if args.train_text_encoder else unet.parameters())
                    accelerator.clip_grad_norm_(params_to_clip, args.max_grad_norm)
                optimizer.step()
                lr_scheduler.step()
                optimizer.zero_grad()
