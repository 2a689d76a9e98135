"""Haian-Jin/LVSM PR #19, fixed: ``scaler.update()`` runs whether or not the step was skipped.

Source (read): https://github.com/Haian-Jin/LVSM/pull/19 (merged): "I fixed by update logic
flow also. and move update outside" the if.
"""
import torch


def main(config, model, optimizer, train_loader, lr_scheduler):
    scaler = torch.amp.GradScaler("cuda", enabled=config.use_amp)
    fwdbwd_step = 0
    for epoch in range(config.epochs):
        for batch in train_loader:
            with torch.autocast(device_type="cuda", dtype=torch.float16, enabled=config.use_amp):
                loss = model(batch)
            scaler.scale(loss).backward()
            fwdbwd_step += 1
            if fwdbwd_step % config.grad_accum_steps != 0:
                continue
            scaler.unscale_(optimizer)
            grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=config.grad_clip_norm)
            if grad_norm > config.skip_step_grad_norm:
                print(f"WARNING: step {fwdbwd_step} grad norm too large {grad_norm} > {config.skip_step_grad_norm}, skipping optimizer step")
            else:
                scaler.step(optimizer)
                lr_scheduler.step()
            scaler.update()
            optimizer.zero_grad(set_to_none=True)
