"""ultralytics/yolov5 #13865: the last ``torch.cuda.amp.GradScaler`` on the training path.

Sources (read):
  https://github.com/ultralytics/yolov5/issues/13865
  https://github.com/ultralytics/yolov5/pull/13866 (merged fix)
  https://github.com/ultralytics/yolov5/pull/13244 (earlier, closed attempt)

"``torch.cuda.amp.GradScaler`` has been deprecated since torch 2.3 and ``torch.cuda.amp`` is
scheduled for removal ... every training run on torch >= 2.3 emits a FutureWarning:
``train.py:344`` - ``scaler = torch.cuda.amp.GradScaler(enabled=amp)``". When torch removes
``torch.cuda.amp``, the line becomes an error. Cut down from train.py; the autocast side was
already migrated (it dispatches to ``torch.amp.autocast``), so it is written that way here.
The accumulation step (``ni - last_opt_step >= accumulate``) unscales, clips, steps and
updates together, which is correct.
"""
import torch


def train(hyp, opt, device, model, optimizer, train_loader, compute_loss, amp: bool, nbs: int = 64):
    batch_size = opt.batch_size
    accumulate = max(round(nbs / batch_size), 1)
    last_opt_step = -1
    nb = len(train_loader)
    scaler = torch.cuda.amp.GradScaler(enabled=amp)  # expect: PA409
    for epoch in range(opt.epochs):
        model.train()
        optimizer.zero_grad()
        for i, (imgs, targets, paths, _) in enumerate(train_loader):
            ni = i + nb * epoch
            imgs = imgs.to(device, non_blocking=True).float() / 255

            with torch.amp.autocast("cuda", enabled=amp):
                pred = model(imgs)
                loss, loss_items = compute_loss(pred, targets.to(device))

            scaler.scale(loss).backward()

            if ni - last_opt_step >= accumulate:
                scaler.unscale_(optimizer)
                torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=10.0)
                scaler.step(optimizer)
                scaler.update()
                optimizer.zero_grad()
                last_opt_step = ni
