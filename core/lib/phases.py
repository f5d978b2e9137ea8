"""Indexing phases: observers that follow an index run's phases, and giving freed memory back to the OS."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

_PHASE_OBSERVERS: list[Callable[[str], None]] = []


@contextmanager
def observe_phases(observer: Callable[[str], None]) -> Iterator[None]:
    """Call ``observer(phase)`` at every phase change of indexing inside the block."""
    _PHASE_OBSERVERS.append(observer)
    try:
        yield
    finally:
        _PHASE_OBSERVERS.remove(observer)


_TRIM: Any = None  # glibc's malloc_trim, None until looked up, False where there is none


def release_free_memory() -> None:
    """Give the allocator's free pages back to the OS (glibc ``malloc_trim(0)``; a no-op
    elsewhere).

    Why, for every user and not only the benchmark: each forward pass has its own tensor
    shapes, and the freed activations stay in glibc's per-thread arenas (torch's worker
    threads) as fragments it never returns by itself. Measured on the synthetic corpus: one
    1,500-text call left +369 MB resident after it returned, +40 MB after one
    ``malloc_trim``; over an indexing run the arenas grew with the corpus (10k sentences: RSS
    +550 MB after the embedding phase; 25k: +850 MB). Called after each forward pass of a
    multi-batch call (the local embedder) and after each indexing window and step, it costs
    well under a millisecond to a few ms; a one-text query embedding never calls it.
    """
    global _TRIM
    if _TRIM is None:
        try:
            import ctypes

            _TRIM = ctypes.CDLL("libc.so.6").malloc_trim
        except (OSError, AttributeError):
            _TRIM = False
    if _TRIM:
        _TRIM(0)


def enter_phase(name: str) -> None:
    """Announce that indexing enters ``name`` (a no-op unless someone observes phases)."""
    for fn in list(_PHASE_OBSERVERS):
        fn(name)
