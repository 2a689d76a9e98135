"""microsoft/Swin-Transformer #311, fixed the way PyTorch's accumulation example says.

Sources (read):
  https://github.com/microsoft/Swin-Transformer/issues/311 (open; no maintainer fix)
  https://github.com/pytorch/pytorch/pull/36601: "you should only call scaler.unscale_()
  (if desired) and scaler.update() in iterations where you actually plan to step."

The unscale and the clip move inside the ``(idx + 1) % ACCUMULATION_STEPS == 0`` block, after
all micro-batches have accumulated; ``torch.amp`` with the device replaces ``torch.cuda.amp``.
"""
import torch


def main(config, model, optimizer, data_loader_train, lr_scheduler):
    scaler = torch.amp.GradScaler("cuda")
    for epoch in range(config.TRAIN.START_EPOCH, config.TRAIN.EPOCHS):
        train_one_epoch(config, model, data_loader_train, optimizer, epoch, lr_scheduler, scaler)


def train_one_epoch(config, model, data_loader, optimizer, epoch, lr_scheduler, scaler):
    model.train()
    optimizer.zero_grad()
    num_steps = len(data_loader)
    for idx, (img, mask, _) in enumerate(data_loader):
        img = img.cuda(non_blocking=True)
        mask = mask.cuda(non_blocking=True)

        with torch.amp.autocast("cuda", enabled=config.ENABLE_AMP):
            loss = model(img, mask)

        if config.TRAIN.ACCUMULATION_STEPS > 1:
            loss = loss / config.TRAIN.ACCUMULATION_STEPS
            scaler.scale(loss).backward()
            if (idx + 1) % config.TRAIN.ACCUMULATION_STEPS == 0:
                if config.TRAIN.CLIP_GRAD:
                    scaler.unscale_(optimizer)
                    grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), config.TRAIN.CLIP_GRAD)
                scaler.step(optimizer)
                optimizer.zero_grad()
                scaler.update()
                lr_scheduler.step_update(epoch * num_steps + idx)
        else:
            optimizer.zero_grad()
            scaler.scale(loss).backward()
            if config.TRAIN.CLIP_GRAD:
                scaler.unscale_(optimizer)
                grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), config.TRAIN.CLIP_GRAD)
            scaler.step(optimizer)
            scaler.update()
            lr_scheduler.step_update(epoch * num_steps + idx)
