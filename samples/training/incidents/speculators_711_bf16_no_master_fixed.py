"""vllm-project/speculators #711, fixed: fp32 master weights, bf16 compute.

Sources (read):
  https://github.com/vllm-project/speculators/pull/711 (merged): "the 'master weights are always
  kept in fp32' change fixes a real correctness bug ... fp32 params reaching ``fully_shard`` +
  mp_policy on the root wrap".
  https://github.com/vllm-project/speculators/pull/668: "all master weights stay float32,
  ``MixedPrecisionPolicy`` handles the bf16 compute cast."

The model is not cast; FSDP2 shards fp32 parameters and casts them to bf16 for compute. Without
FSDP (one process), the forward runs under bf16 autocast on fp32 weights instead.
"""
import contextlib

import torch
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard


def apply_fully_sharded(model: torch.nn.Module):
    mp_policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    for layer in model.layers:
        fully_shard(layer, mp_policy=mp_policy)
    fully_shard(model, mp_policy=mp_policy)
    return model


class Trainer:
    def __init__(self, model, config, train_loader, is_distributed: bool):
        self.model = model
        self.config = config
        self.train_loader = train_loader
        self.is_distributed = is_distributed
        self.hidden_states_dtype = torch.bfloat16

    def setup_model(self):
        if self.is_distributed:
            apply_fully_sharded(self.model)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=self.config.lr, weight_decay=self.config.weight_decay)

    def train_epoch(self):
        self.model.train()
        for batch in self.train_loader:
            if self.is_distributed:
                ctx = contextlib.nullcontext()
            else:
                ctx = torch.autocast(device_type="cuda", dtype=self.hidden_states_dtype)
            with ctx:
                loss = self.model(**batch)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
            self.opt.step()
            self.opt.zero_grad()
