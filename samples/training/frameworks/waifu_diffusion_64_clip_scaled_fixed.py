"""harubaru/waifu-diffusion #64, fixed as the PyTorch AMP notes the issue cites: ``unscale_``
before the clip (the deprecated ``torch.cuda.amp.GradScaler`` left as it was).

Sources (read):
  https://github.com/harubaru/waifu-diffusion/issues/64 (trainer/diffusers_trainer.py line 931:
  "if fp16 is enabled then the clipping would be applied to the _scaled_ gradients, due to
  `GradScaler`")
  https://pytorch.org/docs/master/notes/amp_examples.html#gradient-clipping (the fix the issue
  cites)

The trainer's step, shaped after the issue (the file of January 2023, cut down to the step:
torch.cuda.amp's autocast and GradScaler, as it used them).
"""
import torch


def train(args, unet, text_encoder, vae, noise_scheduler, optimizer, lr_scheduler, train_dataloader):
    scaler = torch.cuda.amp.GradScaler(enabled=args.fp16)  # residual: PA409
    for epoch in range(args.epochs):
        unet.train()
        for step, batch in enumerate(train_dataloader):
            with torch.autocast("cuda", enabled=args.fp16):
                latents = vae.encode(batch["pixel_values"]).latent_dist.sample() * 0.18215
                noise = torch.randn_like(latents)
                timesteps = torch.randint(0, noise_scheduler.config.num_train_timesteps, (latents.shape[0],),
                                          device=latents.device).long()
                noisy_latents = noise_scheduler.add_noise(latents, noise, timesteps)
                encoder_hidden_states = text_encoder(batch["input_ids"])[0]
                noise_pred = unet(noisy_latents, timesteps, encoder_hidden_states).sample
                loss = torch.nn.functional.mse_loss(noise_pred.float(), noise.float(), reduction="mean")
            scaler.scale(loss).backward()
            if args.clip_grad_norm is not None:
                scaler.unscale_(optimizer)
                torch.nn.utils.clip_grad_norm_(unet.parameters(), max_norm=args.clip_grad_norm)
            scaler.step(optimizer)
            scaler.update()
            lr_scheduler.step()
            optimizer.zero_grad()
