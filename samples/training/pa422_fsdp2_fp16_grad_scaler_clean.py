"""PA422 clean twin: FSDP2 in fp16 with torch.amp.GradScaler. FSDP2 gradients are
DTensors, and DTensor's dispatcher reduces the scaler's found_inf across the mesh
(torch/distributed/tensor/_dispatch.py, found_inf_reduce_handler): every rank skips the
same steps without ShardedGradScaler."""
import torch
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard


def train(model, loader):
    policy = MixedPrecisionPolicy(param_dtype=torch.float16, reduce_dtype=torch.float32)
    for layer in model.layers:
        fully_shard(layer, mp_policy=policy)
    fully_shard(model, mp_policy=policy)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    scaler = torch.amp.GradScaler("cuda")
    for batch, target in loader:
        loss = torch.nn.functional.cross_entropy(model(batch), target)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad()
