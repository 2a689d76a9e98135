"""PA422 hazard: FSDP (FullyShardedDataParallel) in fp16 with the plain GradScaler.

Each rank checks only its own gradient shard for inf/NaN: ranks skip different steps and
their loss scales drift apart.
"""
import torch
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
from torch.distributed.fsdp import MixedPrecision

FP16_POLICY = MixedPrecision(param_dtype=torch.float16, reduce_dtype=torch.float32,
                             buffer_dtype=torch.float16)


def train(model, loader, epochs=1):
    model = FSDP(model, mixed_precision=FP16_POLICY)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    scaler = torch.amp.GradScaler("cuda")  # PA422
    for _ in range(epochs):
        for batch, target in loader:
            optimizer.zero_grad(set_to_none=True)
            loss = torch.nn.functional.cross_entropy(model(batch), target)
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
