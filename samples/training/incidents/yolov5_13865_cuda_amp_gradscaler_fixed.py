"""ultralytics/yolov5 #13865, fixed as in PR #13866: a version-guarded ``torch.amp`` import.

Source (read): https://github.com/ultralytics/yolov5/pull/13866 (merged) - "YOLOv5's torch floor
is 1.8.0; ``torch.amp.GradScaler`` only exists since 2.3, so the import is version-guarded:
try: from torch.amp import GradScaler / except ImportError: from torch.cuda.amp import
GradScaler. Call sites are unchanged: ``scaler = GradScaler(enabled=amp)``."

Judged clean: on torch >= 2.3 the call resolves to ``torch.amp.GradScaler`` (whose device
defaults to "cuda"); the ``torch.cuda.amp`` fallback only runs on old torch, where it is not
deprecated. A finding here would be a false positive on the fallback import.
"""
import torch

try:  # torch >= 2.3
    from torch.amp import GradScaler
except ImportError:  # torch < 2.3
    from torch.cuda.amp import GradScaler


def train(hyp, opt, device, model, optimizer, train_loader, compute_loss, amp: bool, nbs: int = 64):
    batch_size = opt.batch_size
    accumulate = max(round(nbs / batch_size), 1)
    last_opt_step = -1
    nb = len(train_loader)
    scaler = GradScaler(enabled=amp)
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
