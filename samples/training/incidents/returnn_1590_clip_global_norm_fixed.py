"""rwth-i6/returnn #1590, fixed as in PR #1595: unscale before noise and clipping.

Sources (read):
  https://github.com/rwth-i6/returnn/issues/1590
  https://github.com/rwth-i6/returnn/pull/1595 (merged): "according to
  https://pytorch.org/docs/stable/notes/amp_examples.html#working-with-unscaled-gradients
  gradients should be unscaled before applying gradient clipping."
"""
import torch


class Updater:
    def __init__(self, network, config):
        self.network = network
        self.optimizer = torch.optim.AdamW(network.parameters(), lr=config.get("learning_rate", 1e-3))
        self._grad_scaler = torch.amp.GradScaler("cuda")
        self._grad_clip_global_norm = config.get("gradient_clip_global_norm", 0.0)

    def backward(self, loss):
        self._grad_scaler.scale(loss).backward()

    def step(self):
        self._grad_scaler.unscale_(self.optimizer)
        if self._grad_clip_global_norm:
            torch.nn.utils.clip_grad_norm_(self.network.parameters(), self._grad_clip_global_norm)
        self._grad_scaler.step(self.optimizer)
        self._grad_scaler.update()
        self.optimizer.zero_grad()


def train_epoch(updater, network, loader):
    for features, targets in loader:
        with torch.autocast(device_type="cuda", dtype=torch.float16):
            loss = torch.nn.functional.cross_entropy(network(features), targets)
        updater.backward(loss)
        updater.step()
