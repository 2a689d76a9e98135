"""Build a model without allocating its weights, whatever its constructor allocates.

accelerate's ``init_empty_weights`` moves each parameter to the meta device once it is
registered, after the constructor allocated it: a fused-experts constructor
(``nn.Parameter(torch.empty(num_experts, 2 * inter, hidden))``) allocates for real first
(DeepSeek-V3 at 671 B parameters asks for hundreds of GB). ``torch.device("meta")`` makes
every tensor meta, so a constructor that reads a value it made (a rotary ``inv_freq``, a
drop-path schedule's ``.tolist()``) reads nothing.

``empty_build`` does both: every tensor a factory function (``torch.empty``, ``zeros``,
``arange``, ...) makes without a device is made on the meta device when it holds more than
``VALUE_LIMIT`` elements, and for real when smaller, so that the tables a constructor
computes (rotary frequencies, masks, schedules) keep their values and a scan reads them as
before (``capture.buffer_ranges`` summarises tables up to the same size); parameters go to
meta as they are registered.
"""
from __future__ import annotations

import contextlib

#: tensors a constructor makes up to this many elements are made with their values (4 MiB in fp32)
VALUE_LIMIT = 1 << 20


def _factories():
    """The factory functions that generate values (torch.device's list, less those that copy
    given data: ``tensor``, ``as_tensor``, ``asarray``... whose data exists already)."""
    import torch
    from torch.utils._device import _device_constructors

    copies = {torch.tensor, torch.as_tensor, torch.asarray, torch.scalar_tensor, torch.nested.nested_tensor}
    return {f for f in _device_constructors() if f not in copies and "sparse" not in f.__name__}


def large_tensors_on_meta():
    """A torch function mode: a factory call without a device makes its tensor on meta when it
    is larger than VALUE_LIMIT elements, else as written. An error of the meta call is
    replaced by the call as written, so that the error the user sees is their code's own."""
    import torch
    from torch.overrides import TorchFunctionMode

    factories = _factories()

    class LargeTensorsOnMeta(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if func not in factories or kwargs.get("device") is not None:
                return func(*args, **kwargs)
            try:
                made = func(*args, **{**kwargs, "device": torch.device("meta")})
            except Exception:  # noqa: BLE001 - the call as written raises its own error, or works
                return func(*args, **kwargs)
            if isinstance(made, torch.Tensor) and made.numel() > VALUE_LIMIT:
                return made
            return func(*args, **kwargs)

    return LargeTensorsOnMeta()


@contextlib.contextmanager
def empty_build(include_buffers: bool = False):
    """Build inside: parameters on meta, large tensors on meta, small ones with values
    (``include_buffers``: every buffer on meta too, as accelerate's ``init_empty_weights``)."""
    from accelerate import init_empty_weights

    with init_empty_weights(include_buffers=include_buffers), large_tensors_on_meta():
        yield


def meta_error(exc: BaseException) -> bool:
    """True when building failed because a tensor had no values (it names the meta device)."""
    return "meta" in str(exc)
