"""release_free_memory gives freed heap pages back to the OS (glibc), which the allocator
does not do by itself when live blocks are scattered through the heap."""

from __future__ import annotations

import pytest
from graphroute.core.apps.perf.perf import _status_kb
from graphroute.core.lib import phases as indexing


def test_scattered_free_blocks_are_returned() -> None:
    indexing.release_free_memory()
    if not indexing._TRIM:
        pytest.skip("no glibc malloc_trim here")
    before = _status_kb("VmRSS") or 0
    blocks = [bytearray(b"x" * 65_536) for _ in range(3_000)]  # ~190 MB below the mmap threshold
    keep = blocks[::32]  # live blocks scattered through the heap pin it in place
    del blocks
    held = _status_kb("VmRSS") or 0
    indexing.release_free_memory()
    after = _status_kb("VmRSS") or 0
    assert held - before > 100_000  # the freed blocks were still resident
    assert held - after > 100_000  # and went back to the OS
    assert len(keep) == 94
