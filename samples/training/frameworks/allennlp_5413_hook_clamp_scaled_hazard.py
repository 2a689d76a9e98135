"""allennlp #5413 (PR #5426 "fix a bug when using fp16 training & gradient clipping"): the
``GradientDescentTrainer``'s ``grad_clipping`` registers a hook on every parameter that clamps
its gradient during the backward pass; with ``use_amp`` that backward is
``scaler.scale(loss).backward()``, so the hooks clamp gradients still multiplied by the loss
scale.

Sources (read):
  https://github.com/allenai/allennlp/issues/5413 ("Concern about the implementation of
  gradient_clipping during fp16 training": "The current implementation is to register a hook")
  https://github.com/allenai/allennlp/pull/5426 ("A bug that incorrectly clips scaled gradients
  when we use mixed-precision training and gradient clipping at the same time"), merged as
  17ef1aa2d; its parent's allennlp/training/util.py ``enable_gradient_clipping`` and
  allennlp/training/gradient_descent_trainer.py ``_train_epoch`` /
  ``MixedPrecisionBackwardCallback`` (``trainer._scaler.scale(loss).backward()``)

The trainer cut down to the step (one batch group, no callbacks, no distributed path).
"""
import torch
from torch.cuda import amp
from torch.nn.utils import clip_grad_norm_


def enable_gradient_clipping(model, grad_clipping):
    if grad_clipping is not None:
        for parameter in model.parameters():
            if parameter.requires_grad:
                parameter.register_hook(
                    lambda grad: grad.clamp(min=-grad_clipping, max=grad_clipping)  # expect: PA401 [if use_amp]
                )


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
            self._scaler = amp.GradScaler()  # expect: PA409

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
            with amp.autocast(self._use_amp):  # expect: PA409
                loss = self.model(**batch)["loss"]
            if self._scaler is not None:
                self._scaler.scale(loss).backward()
            else:
                loss.backward()
            self.rescale_gradients()
            if self._scaler is not None:
                self._scaler.step(self.optimizer)
                self._scaler.update()
            else:
                self.optimizer.step()

    def train(self, num_epochs):
        enable_gradient_clipping(self.model, self._grad_clipping)
        for _ in range(num_epochs):
            self._train_epoch()
