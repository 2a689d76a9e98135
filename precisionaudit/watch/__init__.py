"""``precisionaudit.watch``: the monitor inside the user's training job (docs/watch.md).

A stage of its own: it imports torch and ``core`` (and the op names of ``runtime``), never
the scanner, capture or networkx, because it runs in the user's process beside their
training loop, and it never imports their script. ``log`` (the event files and reading
them back) imports no torch at all.

``precisionaudit.watch(model, optimizer, ...)`` returns a ``monitor.Watch``. This module is
callable, so that the name means the same whether or not the package was imported before
(importing ``precisionaudit.watch.log`` binds ``precisionaudit.watch`` to the module).
"""
import sys
import types


def watch(model, optimizer=None, scaler=None, log_dir: str = "precisionaudit-watch", every: int = 100, **options):
    """Start watching a training run: ``watch.step(loss)`` once per optimizer step, then
    ``watch.close()`` (or ``with precisionaudit.watch(...) as watch:``). ``options``:
    ``skip_streak``, ``min_scale``, ``replays``, ``check_gradients`` (monitor.Watch)."""
    from .monitor import Watch

    return Watch(model, optimizer, scaler=scaler, log_dir=log_dir, every=every, **options)


def __getattr__(name):
    if name == "Watch":
        from .monitor import Watch

        return Watch
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class _CallableModule(types.ModuleType):
    def __call__(self, *args, **kwargs):
        return watch(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
