"""karpathy/nanoGPT PR #709: "Fix deprecated torch.cuda.amp.GradScaler warning".

Sources (read):
  https://github.com/karpathy/nanoGPT/pull/709 (addresses #704)
  https://github.com/Linesight-RL/linesight/issues/51 (the same FutureWarning text)

"Replace deprecated ``torch.cuda.amp.GradScaler(enabled=...)`` with
``torch.amp.GradScaler('cuda', enabled=...)`` on line 196 - Silences the FutureWarning that
appears on recent PyTorch versions - Consistent with the already-updated ``torch.amp.autocast``
call". The warning: "FutureWarning: `torch.cuda.amp.GradScaler(args...)` is deprecated. Please
use `torch.amp.GradScaler('cuda', args...)` instead." Everything else in train.py is the
idiomatic AMP loop (scaler enabled only for float16, unscale before clip, accumulation inside
one step) and must stay quiet. Cut down from nanoGPT's train.py.
"""
from contextlib import nullcontext

import torch

gradient_accumulation_steps = 40
grad_clip = 1.0
device = "cuda"
dtype = "bfloat16" if torch.cuda.is_available() and torch.cuda.is_bf16_supported() else "float16"
device_type = "cuda" if "cuda" in device else "cpu"
ptdtype = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[dtype]
ctx = nullcontext() if device_type == "cpu" else torch.amp.autocast(device_type=device_type, dtype=ptdtype)


def train(model, get_batch, max_iters, weight_decay=1e-1, learning_rate=6e-4, beta1=0.9, beta2=0.95):
    scaler = torch.cuda.amp.GradScaler(enabled=(dtype == "float16"))  # expect: PA409
    optimizer = model.configure_optimizers(weight_decay, learning_rate, (beta1, beta2), device_type)
    X, Y = get_batch("train")
    for iter_num in range(max_iters):
        for micro_step in range(gradient_accumulation_steps):
            with ctx:
                logits, loss = model(X, Y)
                loss = loss / gradient_accumulation_steps
            X, Y = get_batch("train")
            scaler.scale(loss).backward()
        if grad_clip != 0.0:
            scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad(set_to_none=True)
