"""The Hugging Face Trainer's callback: ``precisionaudit.watch`` around ``Trainer.train()``.

    trainer = Trainer(model, args, ..., callbacks=[PrecisionWatchCallback(log_dir="pa-watch")])

The watch starts when training does (the Trainer's model and its optimizer, whose
accelerate wrapper carries the GradScaler of ``fp16=True``), reads each step's loss from
the model's output (``outputs.loss``), and closes with the training. It also logs whether
``logging_nan_inf_filter`` (on by default) is set: the Trainer then replaces an inf/NaN
loss by the average of the others in the loss it logs, and ``watch DIR`` says so (PA707).
"""
from __future__ import annotations

from transformers import TrainerCallback

from ..watch import watch


class PrecisionWatchCallback(TrainerCallback):
    """A ``TrainerCallback`` that watches the run (``options``: those of precisionaudit.watch)."""

    def __init__(self, log_dir: str = "precisionaudit-watch", every: int = 100, **options):
        self.log_dir, self.every, self.options = log_dir, every, options
        self.watch = None

    def on_train_begin(self, args, state, control, model=None, optimizer=None, **kwargs):
        if self.watch is not None:
            self.watch.close()
        self.watch = watch(model, optimizer, log_dir=self.log_dir, every=self.every, **self.options)
        self.watch.note_integration("transformers", logging_nan_inf_filter=bool(args.logging_nan_inf_filter))

    def on_step_end(self, args, state, control, **kwargs):
        if self.watch is not None:
            self.watch.step()

    def on_train_end(self, args, state, control, **kwargs):
        if self.watch is not None:
            self.watch.close()
            self.hidden_losses_warning()

    def hidden_losses_warning(self) -> None:
        """Warn when the logged loss hid inf/NaN losses (PA707)."""
        import warnings

        from ..watch.log import read_log, summarize

        report = summarize(read_log(self.log_dir))
        hidden = sum(loss["nonfinite_count"] for loss in report["loss"].values())
        if hidden and (report.get("integration") or {}).get("logging_nan_inf_filter"):
            warnings.warn(f"precisionaudit.watch: {hidden} step(s) had an inf/NaN loss that the Trainer's "
                          f"logging_nan_inf_filter left out of the logged loss (PA707); see `precisionaudit watch "
                          f"{self.log_dir}`", RuntimeWarning, stacklevel=2)
