"""allennlp #5413, fixed as PR #5426 merged it (17ef1aa2d): no hook; after the backward,
``clip_gradient`` unscales the optimizer's gradients (unless ``rescale_gradients`` already did
this step) and clips their values with ``clip_grad_value_``.

Sources (read):
  https://github.com/allenai/allennlp/issues/5413
  https://github.com/allenai/allennlp/pull/5426 (``GradientDescentTrainer.clip_gradient``: "We have
  to unscale the gradient before clipping"; "The `unscale_` shouldn't be performed more than once
  per optimizer per step call")

The trainer kept ``torch.cuda.amp`` (deprecated since torch 2.4, after the PR): residual PA409.
"""
import torch
from torch.cuda import amp
from torch.cuda.amp.grad_scaler import OptState
from torch.nn.utils import clip_grad_norm_


class GradientDescentTrainer:
    def __init__(self, model, optimizer, data_loader, grad_norm=None, grad_clipping=None, use_amp=False):
        self.model = model
        self.optimizer = optimizer
        self.data_loader = data_loader
        self._grad_norm = grad_norm
        self._grad_clipping = grad_clipping
        self._scaler = None
        self._use_amp = use_amp
        if self._use_amp:
            self._scaler = amp.GradScaler()  # residual: PA409

    def clip_gradient(self):
        if self._grad_clipping is not None:
            # 1. We have to unscale the gradient before clipping
            if self._scaler is not None:
                optimizer_state = self._scaler._per_optimizer_states[id(self.optimizer)]
                # 2. The `unscale_` shouldn't be performed more than once per optimizer per step call,
                # so we only perform `unscale_` if it has not already been called.
                if optimizer_state["stage"] is not OptState.UNSCALED:
                    self._scaler.unscale_(self.optimizer)
            torch.nn.utils.clip_grad_value_(
                [p for p in self.model.parameters() if p.grad is not None], self._grad_clipping
            )

    def rescale_gradients(self):
        if self._grad_norm is not None:
            if self._scaler is not None:
                # Need to first unscale gradients in order to clip as usual.
                self._scaler.unscale_(self.optimizer)
            parameters_to_clip = [p for p in self.model.parameters() if p.grad is not None]
            return clip_grad_norm_(parameters_to_clip, self._grad_norm).item()
        return None

    def _train_epoch(self):
        self.model.train()
        for batch in self.data_loader:
            self.optimizer.zero_grad()
            with amp.autocast(self._use_amp):  # residual: PA409
                loss = self.model(**batch)["loss"]
            if self._scaler is not None:
                self._scaler.scale(loss).backward()
            else:
                loss.backward()
            self.rescale_gradients()
            self.clip_gradient()
            if self._scaler is not None:
                self._scaler.step(self.optimizer)
                self._scaler.update()
            else:
                self.optimizer.step()

    def train(self, num_epochs):
        for _ in range(num_epochs):
            self._train_epoch()
