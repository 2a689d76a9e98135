"""microsoft/Swin-Transformer #311: "AMP + Accumulation-steps Fails".

Sources (read):
  https://github.com/microsoft/Swin-Transformer/issues/311 (open)
  https://github.com/microsoft/Swin-Transformer/blob/main/main_simmim_pt.py
  https://github.com/pytorch/pytorch/pull/36601 ("Amp gradient accumulation example")

With ``--accumulation-steps > 1`` and AMP, ``train_one_epoch`` calls ``scaler.unscale_`` on
every micro-batch while ``scaler.step``/``scaler.update`` run only every N batches, so the
second micro-batch raises "RuntimeError: unscale_() has already been called on this optimizer
since the last update()". (Had it not raised, the gradients accumulated after an unscale
would mix scaled and unscaled values.) PyTorch's accumulation example: call ``unscale_`` and
``update`` only in iterations that step. The script also uses the deprecated
``torch.cuda.amp`` module (imported as ``amp``). Cut down from main_simmim_pt.py.
"""
import torch
import torch.cuda.amp as amp


def main(config, model, optimizer, data_loader_train, lr_scheduler):
    scaler = amp.GradScaler()  # expect: PA409
    for epoch in range(config.TRAIN.START_EPOCH, config.TRAIN.EPOCHS):
        train_one_epoch(config, model, data_loader_train, optimizer, epoch, lr_scheduler, scaler)


def train_one_epoch(config, model, data_loader, optimizer, epoch, lr_scheduler, scaler):
    model.train()
    optimizer.zero_grad()
    num_steps = len(data_loader)
    for idx, (img, mask, _) in enumerate(data_loader):
        img = img.cuda(non_blocking=True)
        mask = mask.cuda(non_blocking=True)

        with amp.autocast(enabled=config.ENABLE_AMP):  # expect: PA409
            loss = model(img, mask)

        if config.TRAIN.ACCUMULATION_STEPS > 1:
            loss = loss / config.TRAIN.ACCUMULATION_STEPS
            scaler.scale(loss).backward()
            if config.TRAIN.CLIP_GRAD:
                scaler.unscale_(optimizer)  # expect: PA402
                grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), config.TRAIN.CLIP_GRAD)
            if (idx + 1) % config.TRAIN.ACCUMULATION_STEPS == 0:
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
