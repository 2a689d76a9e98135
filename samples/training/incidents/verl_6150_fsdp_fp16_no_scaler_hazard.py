"""verl PR #6150: FSDP engine with ``param_dtype=float16`` and no ShardedGradScaler.

Sources (read):
  https://github.com/verl-project/verl/pull/6150 (merged): "[fsdp] fix: honor
  mixed_precision.param_dtype in forward_step autocast (#5932)"
  https://github.com/verl-project/verl/pull/4036 (merged): FP16 training with
  "Gradient Scaler | ShardedGradScaler (enabled)" in ``dp_actor.py``

The new FSDP engine builds ``MixedPrecision(param_dtype=param_dtype, ...)`` from the config and
autocasts the forward to ``param_dtype``, but "fp16 requires ShardedGradScaler (see #4036 for
the legacy dp_actor pattern) which is not yet plumbed into this engine" - fp16 gradients are
produced with no loss scaling ("silently producing bad grads"). The findings should name the
condition "when param_dtype is fp16". Cut down from the PR's diff and description.
"""
import torch
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
from torch.distributed.fsdp import MixedPrecision

DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}


class FSDPEngine:
    def __init__(self, module, config):
        self.config = config
        self.param_dtype = DTYPES[config.get("param_dtype", "bf16")]
        self.module = self._build_fsdp_module(module)
        self.optimizer = torch.optim.AdamW(self.module.parameters(), lr=config.get("lr", 1e-6))

    def _build_fsdp_module(self, module):
        param_dtype = self.param_dtype
        reduce_dtype = torch.float32
        buffer_dtype = torch.float32
        mixed_precision = MixedPrecision(param_dtype=param_dtype, reduce_dtype=reduce_dtype, buffer_dtype=buffer_dtype)  # expect: PA422 [if param_dtype|fp16|float16]
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
            loss.backward()  # expect: PA403 [if param_dtype|fp16|float16]
        grad_norm = self.module.clip_grad_norm_(max_norm=self.config.get("grad_clip", 1.0))
        self.optimizer.step()
        return grad_norm
