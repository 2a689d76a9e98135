"""TRL PR #546 / PR #595 "Use `accelerate` to clip gradient norm", fixed: accelerate's clip,
which unscales first, as ppo_trainer.py has it since #546.

Sources (read):
  https://github.com/huggingface/trl/pull/595 ("Should only really make a difference in case
  accelerator uses ... `self.state.use_fp16 and self.native_amp`"; "already added it in #546")
  https://github.com/huggingface/trl/pull/546 (trl/trainer/ppo_trainer.py, ``train_minibatch``)
  accelerate 1.15.0 ``Accelerator.backward``: ``self.scaler.scale(loss).backward()``

``PPOTrainer.train_minibatch`` after #546, cut down; the Accelerator is built from the config's
``accelerator_kwargs`` (mixed precision from ``accelerate launch``/the config file).
"""
from accelerate import Accelerator


class PPOTrainer:
    def __init__(self, config, model, optimizer):
        self.config = config
        self.accelerator = Accelerator(log_with=config.log_with, **config.accelerator_kwargs)
        self.model, self.optimizer = self.accelerator.prepare(model, optimizer)

    def train_minibatch(self, old_logprobs, values, logprobs, logits, vpreds, mask, advantages, returns):
        loss_p, loss_v, train_stats = self.loss(old_logprobs, values, logits, vpreds, logprobs, mask, advantages,
                                                returns)
        loss = loss_p + loss_v
        self.optimizer.zero_grad()
        self.accelerator.backward(loss)
        if self.config.max_grad_norm is not None:
            if self.accelerator.sync_gradients:
                self.accelerator.clip_grad_norm_(self.model.parameters(), self.config.max_grad_norm)
        self.optimizer.step()
        return train_stats
