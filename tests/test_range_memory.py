"""The range pass keeps freed memory for the next allocation (capture/pytorch/memory.py):
a large tensor made and dropped again and again pages its memory in once, not each time."""
import resource

import pytest
import torch

from precisionaudit.capture.pytorch import memory

pytestmark = pytest.mark.skipif(memory._glibc() is None, reason="glibc's mallopt only")


def _page_faults(times: int = 6) -> int:
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(times):
        torch.ones(16 << 20)  # 64 MiB, written: every fresh page faults in
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before


def test_freed_memory_is_reused_inside_and_given_back_outside():
    pages = (64 << 20) // resource.getpagesize()
    outside = _page_faults()
    with memory.reuse_freed_memory():
        inside = _page_faults()
    after = _page_faults()
    assert outside >= 5 * pages  # each tensor's pages fault in anew
    assert inside <= 2 * pages  # the first one's, then reused
    assert after >= 5 * pages  # the settings went back
