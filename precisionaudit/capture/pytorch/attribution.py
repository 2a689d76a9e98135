"""How much a real run may take: the eager run that says whose error a failed fake-tensor
forward is (capture.py's ``_after_fake_failure``) builds the model with its weights, so it
runs only where they fit."""
from __future__ import annotations

from .offload import available_memory

#: the share of the available memory a model's weights may take for an eager run: autocast's
#: low-precision copies and the emulation's fp32 widenings come on top of them
EAGER_SHARE = 0.25


def eager_budget() -> int:
    """Bytes of weights (parameters and buffers) an eager run may hold."""
    return int(EAGER_SHARE * available_memory())


def weight_bytes(model) -> int:
    """Bytes the model's parameters and buffers take when real (each storage once: tied
    weights count once), read from a model built on the meta device as well."""
    seen, total = set(), 0
    for t in [*model.parameters(), *model.buffers()]:
        key = (t.untyped_storage()._cdata, t.storage_offset(), tuple(t.shape))
        if key not in seen:
            seen.add(key)
            total += t.numel() * t.element_size()
    return total


def size_text(n: float) -> str:
    """Bytes as a person reads them: 512 B, 2.8 MiB, 135.0 GiB."""
    if n < 1024:
        return f"{n:.0f} B"
    for unit in ("KiB", "MiB", "GiB"):
        n /= 1024
        if n < 1024 or unit == "GiB":
            return f"{n:.1f} {unit}"
