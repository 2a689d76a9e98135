"""Keep freed memory in the process while the range pass runs, instead of handing it back.

glibc's malloc serves each large request (above 128 KiB, a threshold it raises up to 32 MiB
as it sees such blocks freed) from fresh pages of its own ``mmap`` and returns them on
``free``, and trims the top of its heap once a threshold's worth lies free there. The run
under the target allocates the same large temporaries op after op and batch after batch
(autocast's fp16 copy of each GEMM weight, the emulation's fp32 widening of it, the
activations), so each of them pays for its pages again: the kernel's page faults and zeroing
cost more than the copy itself (an fp32 widening of a 768 x 3072 fp16 weight: 8.4 ms into
fresh pages, 0.23 ms into reused ones; a 1.3 B model's 2048 x 8192 weights are always above
the 32 MiB ceiling). Within ``reuse_freed_memory()`` malloc takes every request from its heap
and trims nothing, so freed blocks serve the next requests. On exit ``malloc_trim`` returns
what is free, and the thresholds are set to the most glibc's own adjustment reaches (32 MiB
for mmap, 64 MiB for trimming; setting them fixes them from then on, and glibc has no call
that reads them). Peak RSS stays the peak of what is live, plus fragmentation. Keeping freed
memory is what jemalloc and tcmalloc do by default, and why CPU tuning guides for PyTorch
recommend them.

On a C library without glibc's ``mallopt`` / ``malloc_trim`` (macOS, musl) it does nothing.
"""
from __future__ import annotations

import contextlib
import ctypes
import ctypes.util

_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD, _M_MMAP_MAX = -1, -3, -4  # glibc's malloc.h
#: glibc's defaults and dynamic ceilings (DEFAULT_MMAP_THRESHOLD_MAX on 64-bit, twice it to trim)
_MMAP_MAX, _MMAP_THRESHOLD, _TRIM_THRESHOLD = 65536, 32 << 20, 64 << 20


def _glibc():
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return libc if hasattr(libc, "mallopt") and hasattr(libc, "malloc_trim") else None
    except OSError:
        return None


@contextlib.contextmanager
def reuse_freed_memory():
    """Within the block, malloc reuses freed memory instead of returning it (see the module doc)."""
    libc = _glibc()
    # -1: never trim (mallopt(3)); 0 mmap'd blocks: every request from the heap
    if libc is None or not (libc.mallopt(_M_MMAP_MAX, 0) and libc.mallopt(_M_TRIM_THRESHOLD, -1)):
        yield
        return
    try:
        yield
    finally:
        libc.malloc_trim(0)
        libc.mallopt(_M_MMAP_MAX, _MMAP_MAX)
        libc.mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD)
        libc.mallopt(_M_TRIM_THRESHOLD, _TRIM_THRESHOLD)
