"""A Lightning callback: ``precisionaudit.watch`` around ``Trainer.fit()``.

    trainer = L.Trainer(precision="16-mixed", callbacks=[PrecisionWatch(log_dir="pa-watch")])

The watch starts with the fit (the LightningModule, its first optimizer, and the
GradScaler of a ``16-mixed`` precision plugin), takes each optimizer step's loss from
``training_step``'s output, and closes with the fit. The replay of a failing step runs the
module's ``forward``: it needs ``training_step`` to call it (``self(x)``).
"""
from __future__ import annotations

try:
    from lightning.pytorch.callbacks import Callback
except ImportError:  # the standalone package
    from pytorch_lightning.callbacks import Callback

from ..watch import watch


class PrecisionWatch(Callback):
    """A Lightning ``Callback`` that watches the run (``options``: those of precisionaudit.watch)."""

    def __init__(self, log_dir: str = "precisionaudit-watch", every: int = 100, **options):
        self.log_dir, self.every, self.options = log_dir, every, options
        self.watch = None
        self._global_step = 0

    def on_fit_start(self, trainer, pl_module):
        scaler = getattr(trainer.precision_plugin, "scaler", None)
        self.watch = watch(pl_module, trainer.optimizers[0], scaler, log_dir=self.log_dir, every=self.every,
                           **self.options)
        self._global_step = trainer.global_step

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        if self.watch is None or trainer.global_step == self._global_step:
            return  # no optimizer step yet (gradient accumulation)
        self._global_step = trainer.global_step
        loss = outputs.get("loss") if isinstance(outputs, dict) else outputs
        self.watch.step(loss)

    def on_fit_end(self, trainer, pl_module):
        if self.watch is not None:
            self.watch.close()
