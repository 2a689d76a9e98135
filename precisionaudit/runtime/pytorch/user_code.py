"""Run a model file's code so that it cannot forge the verdict or corrupt the report.

While user code runs, its ``print`` goes to stderr (a printing model keeps ``--format
json`` valid), and whatever it raises that is not an ordinary exception — ``sys.exit(0)``,
``SystemExit('x')``, a ``KeyboardInterrupt`` it raises itself, any ``BaseException``
subclass — becomes a CaptureError naming the function: exit 2, never exit 0 or 1.
A real Ctrl-C, SIGTERM or ``--timeout`` passes through. What cannot be caught in-process
(``os._exit``, a crash, writes to file descriptor 1 from C code, an endless C call) is
the parent's to judge: the commands run this code in a child process (core.isolation).
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
    """Put back torch's process-wide state a model file may change (``set_default_dtype`` at
    import, ``set_default_device``, ``set_grad_enabled``, autocast switched on by hand), and
    what a forward stopped between bytecodes (``--timeout``, Ctrl-C) may leave behind: a
    ``with autocast`` or a torch mode entered and never exited. One model of a scan cannot
    change how the next one is judged, nor a command run in-process (the Python API, the
    tests) the ones after it."""
    import torch
    from torch.utils._python_dispatch import _len_torch_dispatch_stack

    dtype, grad = torch.get_default_dtype(), torch.is_grad_enabled()
    device_context = getattr(torch._GLOBAL_DEVICE_CONTEXT, "device_context", None)
    autocast = {d: (torch.is_autocast_enabled(d), torch.get_autocast_dtype(d)) for d in ("cpu", "cuda")}
    depths = torch._C._len_torch_function_stack(), _len_torch_dispatch_stack()
    try:
        yield
    finally:
        # first, before any call a mode left behind would intercept; set_default_device's
        # DeviceContext is one of these modes, and its record goes back with it
        while torch._C._len_torch_function_stack() > depths[0]:
            torch._C._pop_torch_function_stack()
        while _len_torch_dispatch_stack() > depths[1]:
            torch._C._pop_torch_dispatch_stack()
        torch._GLOBAL_DEVICE_CONTEXT.device_context = device_context
        torch.set_default_dtype(dtype)
        torch.set_grad_enabled(grad)
        for d, (enabled, low) in autocast.items():
            torch.set_autocast_enabled(d, enabled)
            torch.set_autocast_dtype(d, low)


def describe(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__
