"""Haian-Jin/LVSM PR #19: ``scaler.update()`` skipped on the branch that skips the step.

Source (read): https://github.com/Haian-Jin/LVSM/pull/19 (merged)

"scaler.update() was only called when scaler.step() was also called. If an optimizer step was
skipped, scaler.update() was also skipped, leaving the scaler in an invalid state for the next
iteration." The run crashed after "WARNING: step 9 grad norm too large 5.59 > 5.0, skipping
optimizer step" with "RuntimeError: unscale_() has already been called on this optimizer since
the last update()" raised by ``scaler.unscale_(optimizer)`` in ``main()``. Fix: "move update
outside" the if. The loop is cut down from the traceback and the PR text (train.py not read).

Rule-table note: PA402 names "update() ... skipped on a branch that steps"; here the path
without update() is the one that unscales and then skips the step. The expected finding is our
reading: the ``unscale_`` call, which runs on a path that reaches the next iteration with no
``update()``.
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
            scaler.unscale_(optimizer)  # expect: PA402
            grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=config.grad_clip_norm)
            if grad_norm > config.skip_step_grad_norm:
                print(f"WARNING: step {fwdbwd_step} grad norm too large {grad_norm} > {config.skip_step_grad_norm}, skipping optimizer step")
            else:
                scaler.step(optimizer)
                scaler.update()
                lr_scheduler.step()
            optimizer.zero_grad(set_to_none=True)
