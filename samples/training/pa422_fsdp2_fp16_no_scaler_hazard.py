"""PA422 hazard (warning): FSDP2 computing in fp16 with no loss scaler: small gradients
round to zero in the fp16 backward."""
import torch
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard


def train(model, loader):
    policy = MixedPrecisionPolicy(param_dtype=torch.float16, reduce_dtype=torch.float32)  # PA422
    for layer in model.layers:
        fully_shard(layer, mp_policy=policy)
    fully_shard(model, mp_policy=policy)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for batch, target in loader:
        loss = torch.nn.functional.cross_entropy(model(batch), target)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
