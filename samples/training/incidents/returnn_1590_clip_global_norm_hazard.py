"""rwth-i6/returnn #1590: "Torch: gradient_clip wrong when grad_scaler is used".

Sources (read):
  https://github.com/rwth-i6/returnn/issues/1590
  https://github.com/rwth-i6/returnn/pull/1595 (merged fix: "Torch: unscale gradients before
  noise and clipping")

"in returnn the scaled gradient seem to be used ... the effective value
gradient_clip_global_norm with AMP is reduced by a factor of 65k." The updater clipped the
global norm of the scaled gradients and then ``grad_scaler.step(self.optimizer)`` unscaled
them again. Shaped after the issue's description of ``returnn/torch/updater.py`` (the file
itself was not read): the updater owns the scaler across methods.
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
        if self._grad_clip_global_norm:
            torch.nn.utils.clip_grad_norm_(self.network.parameters(), self._grad_clip_global_norm)  # expect: PA401
        self._grad_scaler.step(self.optimizer)
        self._grad_scaler.update()
        self.optimizer.zero_grad()


def train_epoch(updater, network, loader):
    for features, targets in loader:
        with torch.autocast(device_type="cuda", dtype=torch.float16):
            loss = torch.nn.functional.cross_entropy(network(features), targets)
        updater.backward(loss)
        updater.step()
