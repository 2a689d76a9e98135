"""The range pass keeps freed memory for the next allocation (capture/pytorch/memory.py):
a large temporary made and dropped again and again, as the run under the target makes the
fp32 widening of each fp16 weight on every batch, soon stops paging its memory in anew."""
import resource

import pytest
import torch

from precisionaudit.capture.pytorch import memory

pytestmark = pytest.mark.skipif(memory._glibc() is None, reason="glibc's mallopt only")

MIB = 1 << 20


def _page_faults(make, times: int) -> int:
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(times):
        make()  # written, then dropped: each fresh page faults in
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before


def test_freed_memory_is_reused_inside_and_given_back_outside():
    weight = torch.ones(16 * MIB, dtype=torch.float16)
    pages = (64 * MIB) // resource.getpagesize()  # of its fp32 widening

    def widen():
        return weight.float()

    outside = _page_faults(widen, 6)
    with memory.reuse_freed_memory():
        # torch allocates with posix_memalign, which glibc (before 2.38) cannot serve from a
        # freed block of the very same size: the first widenings grow the heap (8 of the
        # first 12 here) until freed neighbours coalesce into blocks that serve the rest
        _page_faults(widen, 18)
        inside = _page_faults(widen, 12)
    # above glibc's 32 MiB ceiling a block is mmap'd and unmapped again: after the block a
    # request larger than all the heap held faults in each time
    after = _page_faults(lambda: torch.ones(256 * MIB), 3)
    assert outside >= 5 * pages  # each widening's pages fault in anew
    assert inside <= pages  # then the same pages serve them all
    assert after >= 3 * 16 * pages  # the settings went back
