"""PA422 clean twin: FSDP in fp16 with ShardedGradScaler, which all-reduces found_inf so
every rank skips the same steps."""
import torch
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
from torch.distributed.fsdp import MixedPrecision
from torch.distributed.fsdp.sharded_grad_scaler import ShardedGradScaler

FP16_POLICY = MixedPrecision(param_dtype=torch.float16, reduce_dtype=torch.float32,
                             buffer_dtype=torch.float16)


def train(model, loader, epochs=1):
    model = FSDP(model, mixed_precision=FP16_POLICY)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    scaler = ShardedGradScaler()
    for _ in range(epochs):
        for batch, target in loader:
            optimizer.zero_grad(set_to_none=True)
            loss = torch.nn.functional.cross_entropy(model(batch), target)
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
