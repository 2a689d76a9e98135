"""verl PR #6150, fixed with the PR #4036 pattern: a ShardedGradScaler when fp16.

Sources (read):
  https://github.com/verl-project/verl/pull/6150 (review: "Could help to add
  `ShardedGradScaler` back and do some verification?" - the author: "I'll mirror the pattern
  from https://github.com/verl-project/verl/pull/4036 (dp_actor.py)")
  https://github.com/verl-project/verl/pull/4036: ``if self.config.dtype == "float16": self.scaler
  = ShardedGradScaler(growth_interval=400) else: self.scaler = None``, then ``unscale_`` before
  clipping and ``scaler.step``/``update``.

FSDP's grad clipping is ``self.module.clip_grad_norm_`` (sharded), called after ``unscale_``.
"""
import torch
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
from torch.distributed.fsdp import MixedPrecision
from torch.distributed.fsdp.sharded_grad_scaler import ShardedGradScaler

DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}


class FSDPEngine:
    def __init__(self, module, config):
        self.config = config
        self.param_dtype = DTYPES[config.get("param_dtype", "bf16")]
        self.module = self._build_fsdp_module(module)
        self.optimizer = torch.optim.AdamW(self.module.parameters(), lr=config.get("lr", 1e-6))
        if self.param_dtype == torch.float16:
            self.scaler = ShardedGradScaler(growth_interval=400)
        else:
            self.scaler = None

    def _build_fsdp_module(self, module):
        param_dtype = self.param_dtype
        reduce_dtype = torch.float32
        buffer_dtype = torch.float32
        mixed_precision = MixedPrecision(param_dtype=param_dtype, reduce_dtype=reduce_dtype, buffer_dtype=buffer_dtype)
        return FSDP(module, mixed_precision=mixed_precision, use_orig_params=True)

    def forward_step(self, micro_batch):
        with torch.autocast(device_type="cuda", dtype=self.param_dtype):
            logits = self.module(micro_batch["input_ids"])
            loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), micro_batch["labels"].flatten())
        return loss

    def train_batch(self, micro_batches):
        self.optimizer.zero_grad()
        for micro_batch in micro_batches:
            loss = self.forward_step(micro_batch) / len(micro_batches)
            if self.scaler is not None:
                self.scaler.scale(loss).backward()
            else:
                loss.backward()
        if self.scaler is not None:
            self.scaler.unscale_(self.optimizer)
        grad_norm = self.module.clip_grad_norm_(max_norm=self.config.get("grad_clip", 1.0))
        if self.scaler is not None:
            self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            self.optimizer.step()
        return grad_norm
