"""SpeechBrain #612, fixed as PR #615 merged it: the backward leaves ``autocast`` and
``self.scaler.unscale_(self.optimizer)`` runs before ``check_gradients`` clips.

Sources (read):
  https://github.com/speechbrain/speechbrain/issues/612
  https://github.com/speechbrain/speechbrain/pull/615 (merge 4765896b9, speechbrain/core.py
  ``Brain.fit_batch``)

The fix kept ``torch.cuda.amp`` (deprecated since torch 2.4, after the PR): residual PA409.
"""
import torch


class Brain:
    def __init__(self, modules, opt_class, hparams, run_opts):
        self.modules = torch.nn.ModuleDict(modules)
        self.opt_class = opt_class
        self.auto_mix_prec = run_opts.get("auto_mix_prec", False)
        self.max_grad_norm = hparams.get("max_grad_norm", 5.0)
        self.nonfinite_count = 0
        self.nonfinite_patience = 3
        if self.auto_mix_prec:
            self.scaler = torch.cuda.amp.GradScaler()  # residual: PA409

    def init_optimizers(self):
        self.optimizer = self.opt_class(self.modules.parameters())

    def compute_forward(self, batch, stage):
        raise NotImplementedError

    def compute_objectives(self, predictions, batch, stage):
        raise NotImplementedError

    def fit_batch(self, batch):
        # Managing automatic mixed precision
        if self.auto_mix_prec:
            self.optimizer.zero_grad()
            with torch.cuda.amp.autocast():  # residual: PA409
                outputs = self.compute_forward(batch, "train")
                loss = self.compute_objectives(outputs, batch, "train")
            self.scaler.scale(loss).backward()
            self.scaler.unscale_(self.optimizer)
            if self.check_gradients(loss):
                self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            outputs = self.compute_forward(batch, "train")
            loss = self.compute_objectives(outputs, batch, "train")
            loss.backward()
            if self.check_gradients(loss):
                self.optimizer.step()
            self.optimizer.zero_grad()
        return loss.detach().cpu()

    def check_gradients(self, loss):
        if not torch.isfinite(loss):
            self.nonfinite_count += 1
            if self.nonfinite_count > self.nonfinite_patience:
                raise ValueError("Loss is not finite and patience is exhausted.")
            return False
        # Clip gradient norm
        torch.nn.utils.clip_grad_norm_((p for p in self.modules.parameters()), self.max_grad_norm)
        return True

    def fit(self, train_set):
        self.init_optimizers()
        for batch in train_set:
            self.fit_batch(batch)
