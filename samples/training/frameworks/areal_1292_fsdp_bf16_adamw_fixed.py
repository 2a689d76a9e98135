"""AReaL #1292, fixed by PR #1369: the parameters are stored in ``optimizer_dtype`` (float32 by
default), so AdamW keeps fp32 master weights and states; FSDP2 still computes in bf16.

Sources (read):
  https://github.com/areal-project/AReaL/issues/1292 (8 x L20X, Qwen3-8B, same recipe on three
  frameworks: final loss 0.0464 / 0.0480 with fp32 states, ~3x higher with the FSDP engine)
  https://github.com/areal-project/AReaL/pull/1369 (the fix: ``optimizer_dtype`` defaulting to
  float32 for the stored parameters, bf16 compute kept through FSDP2's MixedPrecisionPolicy)

Shaped after the issue and the PR's description (areal/engine/fsdp_engine.py): the dtype is a
config field named by a string, the model made in one helper method and the optimizer in
another.
"""
from dataclasses import dataclass

import torch
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
from transformers import AutoModelForCausalLM


@dataclass
class TrainEngineConfig:
    path: str = ""
    dtype: str = "bfloat16"
    optimizer_dtype: str = "float32"
    lr: float = 1e-4
    weight_decay: float = 0.01


class FSDPEngine:
    def __init__(self, config: TrainEngineConfig):
        self.config = config

    def initialize(self):
        self._create_device_model()
        self._create_optimizer()

    def _create_device_model(self):
        dtype = getattr(torch, self.config.dtype)
        storage = getattr(torch, self.config.optimizer_dtype)  # fp32 master weights
        self.model = AutoModelForCausalLM.from_pretrained(self.config.path, torch_dtype=storage)
        fully_shard(self.model, mp_policy=MixedPrecisionPolicy(param_dtype=dtype, reduce_dtype=torch.float32))

    def _create_optimizer(self):
        self.optimizer = torch.optim.AdamW(
            self.model.parameters(), lr=self.config.lr, weight_decay=self.config.weight_decay)
