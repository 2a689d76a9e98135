"""pytorch #106395: FSDP ``reduce_dtype=bfloat16`` trains on 12x8 GPUs and diverges on 48x8.

Source (read): https://github.com/pytorch/pytorch/issues/106395 ("FP32 accumulation of bf16
gradients in FSDP")

"I was training a model (1B and 7B param llama-like architecture) using FSDP in bf16, and found
that it trained well on 12x8 GPUs, but the training would become unstable on 48x8 GPUs. After a
good deal of debugging, we found that changing `reduce_dtype` to `None` instead of `bf16`
resolved the issue ... we leave `param_dtype=None` and instead do mixed precision using the
`torch.cuda.amp(torch.bfloat16)` wrapper. And we're also still using `torch==1.13`." The
gradient reduce-scatter sums 384 bf16 contributions in bf16 (8 bits of mantissa). Cut down to
the setup the reporter describes (the ``torch.cuda.amp`` autocast is the deprecated spelling).
"""
import torch
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
from torch.distributed.fsdp import MixedPrecision


def build(model, lr: float = 3e-4):
    mixed_precision = MixedPrecision(param_dtype=None, reduce_dtype=torch.bfloat16, buffer_dtype=None)  # expect: PA421
    model = FSDP(model, mixed_precision=mixed_precision, device_id=torch.cuda.current_device())
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.95), weight_decay=0.1)
    return model, optimizer


def train(model, optimizer, loader, max_grad_norm: float = 1.0):
    model.train()
    for input_ids, labels in loader:
        with torch.cuda.amp.autocast(dtype=torch.bfloat16):  # expect: PA409
            logits = model(input_ids.cuda())
            loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), labels.cuda().flatten())
        loss.backward()
        model.clip_grad_norm_(max_grad_norm)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
