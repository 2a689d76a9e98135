"""Where autocast is on right now, and a block with it off: the plan's regions (apply) and
the watch's replay ask the same question of every device type torch.autocast takes."""
from __future__ import annotations

import contextlib

import torch

#: the device types torch.autocast takes (a build without one raises on asking: skipped)
DEVICES = ("cuda", "cpu", "xpu", "mps", "hpu")


def autocast_devices() -> list[str]:
    """The device types on which autocast is on right now."""
    on = []
    for device in DEVICES:
        try:
            if torch.is_autocast_enabled(device):
                on.append(device)
        except (RuntimeError, ValueError, TypeError):
            continue
    return on


def autocast_state() -> list[tuple[str, torch.dtype]]:
    """[(device, dtype)] of every device type autocast is on for: what a replay enters again."""
    return [(device, torch.get_autocast_dtype(device)) for device in autocast_devices()]


@contextlib.contextmanager
def autocast_disabled():
    """Autocast off for every device type on which it is on right now."""
    with contextlib.ExitStack() as stack:
        for device in autocast_devices():
            stack.enter_context(torch.autocast(device, enabled=False))
        yield
