"""pytorch #106395, fixed as the reporter did: ``reduce_dtype=None`` (gradients reduced in fp32).

Source (read): https://github.com/pytorch/pytorch/issues/106395 - "changing `reduce_dtype` to
`None` instead of `bf16` resolved the issue. However, this fix isn't ideal, as the model now
runs slower since it's sending around full-precision gradients."

The reporter's fix leaves the deprecated ``torch.cuda.amp.autocast`` in place (``residual``).
"""
import torch
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
from torch.distributed.fsdp import MixedPrecision


def build(model, lr: float = 3e-4):
    mixed_precision = MixedPrecision(param_dtype=None, reduce_dtype=None, buffer_dtype=None)
    model = FSDP(model, mixed_precision=mixed_precision, device_id=torch.cuda.current_device())
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.95), weight_decay=0.1)
    return model, optimizer


def train(model, optimizer, loader, max_grad_norm: float = 1.0):
    model.train()
    for input_ids, labels in loader:
        with torch.cuda.amp.autocast(dtype=torch.bfloat16):  # residual: PA409
            logits = model(input_ids.cuda())
            loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), labels.cuda().flatten())
        loss.backward()
        model.clip_grad_norm_(max_grad_norm)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
