"""SpeechBrain #612 "About Mixed Precision Training" (PR #615 "Amp4 gradient clipping"): the
``Brain`` class, which owns SpeechBrain's training step, clipped the gradients with
``max_grad_norm`` while they were still multiplied by the GradScaler's scale, and ran the
backward inside ``autocast``. LibriSpeech recipes "yield a faster training but no convergence".

Sources (read):
  https://github.com/speechbrain/speechbrain/issues/612 (the ``fit_batch`` quoted below; the
  reporter: "According to Pytorch documentation for amp+gradient clipping ... should be
  written as" the version of the fixed twin)
  https://github.com/speechbrain/speechbrain/pull/615 ("adding an unscaling step for amp
  before gradient clipping"), merged as 4765896b9 in speechbrain/core.py
  speechbrain/core.py at 308763ec8 (the parent): ``Brain.__init__`` makes
  ``torch.cuda.amp.GradScaler()`` when ``auto_mix_prec``; ``Brain.check_gradients`` clips with
  ``torch.nn.utils.clip_grad_norm_(..., self.max_grad_norm)``

``Brain`` cut down to the step (the run options, the optimizer and the non-finite patience).
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
            self.scaler = torch.cuda.amp.GradScaler()  # expect: PA409

    def init_optimizers(self):
        self.optimizer = self.opt_class(self.modules.parameters())

    def compute_forward(self, batch, stage):
        raise NotImplementedError

    def compute_objectives(self, predictions, batch, stage):
        raise NotImplementedError

    def fit_batch(self, batch):
        # Managing automatic mixed precision
        if self.auto_mix_prec:
            with torch.cuda.amp.autocast():  # expect: PA409
                outputs = self.compute_forward(batch, "train")
                loss = self.compute_objectives(outputs, batch, "train")
                self.scaler.scale(loss).backward()  # expect: PA408 [if auto_mix_prec]
                if self.check_gradients(loss):
                    self.scaler.step(self.optimizer)
                self.optimizer.zero_grad()
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
        torch.nn.utils.clip_grad_norm_((p for p in self.modules.parameters()), self.max_grad_norm)  # expect: PA401 [if auto_mix_prec]
        return True

    def fit(self, train_set):
        self.init_optimizers()
        for batch in train_set:
            self.fit_batch(batch)
