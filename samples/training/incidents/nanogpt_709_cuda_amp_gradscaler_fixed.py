"""karpathy/nanoGPT PR #709, fixed: ``torch.amp.GradScaler('cuda', enabled=...)``.

Source (read): https://github.com/karpathy/nanoGPT/pull/709 - the replacement the FutureWarning
itself names. The scaler stays enabled only when the autocast dtype is float16.
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
    scaler = torch.amp.GradScaler("cuda", enabled=(dtype == "float16"))
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
