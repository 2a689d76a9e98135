"""vllm-project/speculators #765 / #711: pure-bf16 AdamW, every norm weight stays exactly 1.0.

Sources (read):
  https://github.com/vllm-project/speculators/pull/765 ("Fix numerical issues by holding params
  in fp32"): "All models trained with `speculators` end up with untrained normalization layers
  (`.weight == 1.0`) ... because our training is done fully in `bf16` ... the gradient update
  delta is smaller than the step size to move away from 1.0 in bf16 format."
  https://github.com/vllm-project/speculators/pull/711 (merged, "DDP + updated AMP strategy"):
  "``Trainer.setup_model`` casts the model to ``hidden_states_dtype`` (bf16) before
  ``apply_fully_sharded``, so the sharded tensors the optimizer steps on are bf16 and
  ``MixedPrecisionPolicy(param_dtype=bf16)`` is effectively a no-op - no fp32 master weights
  exist anywhere ... AdamW decoupled weight decay is silently dropped for every parameter".
  https://github.com/vllm-project/speculators/blob/main/src/speculators/train/utils.py
  (``apply_fully_sharded``, read)
  Same failure, another codebase: https://github.com/workofart/ml-by-hand/pull/85 (its own
  autograd library, so not reproduced separately).

Cut down: the trainer's setup as PR #711 describes it, ``apply_fully_sharded`` as read.
"""
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
        self.model = self.model.to(dtype=self.hidden_states_dtype)
        if self.is_distributed:
            apply_fully_sharded(self.model)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=self.config.lr, weight_decay=self.config.weight_decay)  # expect: PA407

    def train_epoch(self):
        self.model.train()
        for batch in self.train_loader:
            loss = self.model(**batch)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
            self.opt.step()
            self.opt.zero_grad()
