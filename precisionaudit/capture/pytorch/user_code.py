"""Run a model file's code so that it cannot forge the verdict or corrupt the report.

While user code runs, its ``print`` goes to stderr (a printing model keeps ``--format
json`` valid), and whatever it raises that is not an ordinary exception — ``sys.exit(0)``,
``SystemExit('x')``, a ``KeyboardInterrupt`` it raises itself, any ``BaseException``
subclass — becomes a CaptureError naming the function: exit 2, never exit 0 or 1.
A real Ctrl-C, SIGTERM or ``--timeout`` passes through. What cannot be caught in-process
(``os._exit``, writes to file descriptor 1 from C code, killing the process) is not
covered: a model file is Python, and it runs with the user's rights.
"""
from __future__ import annotations

import contextlib
import sys

from ...core.errors import CaptureError
from ...core.signals import (
    Interrupted,
    Terminated,
    TimeLimitExceeded,
    ctrl_c_is_interrupted,
)


@contextlib.contextmanager
def user_code(path: str, what: str):
    """Run the block as the model's ``what`` (``get_model()``, ``forward``, ...)."""
    with contextlib.redirect_stdout(sys.stderr):
        try:
            yield
        except (Exception, Interrupted, Terminated, TimeLimitExceeded):
            raise
        except SystemExit as exc:
            raise CaptureError(f"{path}: {what} called sys.exit({exc.code!r}); a model file must "
                               "return, not exit") from exc
        except KeyboardInterrupt as exc:
            if not ctrl_c_is_interrupted():  # the Python API: it may be the user's Ctrl-C
                raise
            raise CaptureError(f"{path}: {what} raised {describe(exc)}") from exc
        except BaseException as exc:
            raise CaptureError(f"{path}: {what} raised {describe(exc)}") from exc


@contextlib.contextmanager
def torch_defaults_kept():
    """Put back torch's process-wide defaults a model file may change (``set_default_dtype``
    at import, ``set_default_device``, ``set_grad_enabled``), so that one model of a scan
    cannot change how the next one is judged."""
    import torch

    dtype, device, grad = torch.get_default_dtype(), torch.get_default_device(), torch.is_grad_enabled()
    try:
        yield
    finally:
        torch.set_default_dtype(dtype)
        torch.set_grad_enabled(grad)
        if torch.get_default_device() != device:  # setting it pushes a global function mode
            torch.set_default_device(None if device.type == "cpu" else device)


def describe(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__
