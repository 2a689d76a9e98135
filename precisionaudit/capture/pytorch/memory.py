"""Keep freed memory in the process while the range pass runs, instead of handing it back.

glibc's malloc serves each large request (above 128 KiB, a threshold it raises up to 32 MiB)
from fresh pages of its own ``mmap`` and returns them on ``free``, and trims the top of its
heap as soon as 128 KiB lie free there. The run under the target allocates the same large
temporaries op after op and batch after batch (autocast's fp16 copy of each GEMM weight, the
emulation's fp32 widening of it, the activations), so each of them pays for its pages again:
the kernel's page faults and zeroing cost more than the copy itself (an fp32 widening of a
768 x 3072 fp16 weight: 8.4 ms into fresh pages, 0.23 ms into reused ones). Within
``reuse_freed_memory()`` malloc takes large requests from its heap too and trims nothing,
so freed blocks serve the next requests; on exit the settings go back and ``malloc_trim``
returns what is free. Peak RSS stays the peak of what is live, plus fragmentation. This is
what jemalloc or tcmalloc do by default, and why PyTorch's CPU tuning guides recommend them.

On a C library without glibc's ``mallopt`` / ``malloc_trim`` (macOS, musl) it does nothing.
"""
from __future__ import annotations

import contextlib
import ctypes
import ctypes.util

_M_TRIM_THRESHOLD, _M_MMAP_MAX = -1, -4  # glibc's malloc.h
_DEFAULT_TRIM_THRESHOLD, _DEFAULT_MMAP_MAX = 128 * 1024, 65536


def _glibc():
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return libc if hasattr(libc, "mallopt") and hasattr(libc, "malloc_trim") else None
    except OSError:
        return None


@contextlib.contextmanager
def reuse_freed_memory():
    """Within the block, malloc reuses freed memory instead of returning it (see the module
    doc). glibc keeps fixed thresholds afterwards (its defaults), where it would have adjusted
    them to the sizes freed."""
    libc = _glibc()
    # -1: never trim (mallopt(3)); 0 mmap'd blocks: every request from the heap
    if libc is None or not (libc.mallopt(_M_MMAP_MAX, 0) and libc.mallopt(_M_TRIM_THRESHOLD, -1)):
        yield
        return
    try:
        yield
    finally:
        libc.mallopt(_M_MMAP_MAX, _DEFAULT_MMAP_MAX)
        libc.mallopt(_M_TRIM_THRESHOLD, _DEFAULT_TRIM_THRESHOLD)
        libc.malloc_trim(0)
