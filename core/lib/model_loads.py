"""Model loading, timed apart from the work that first needed the model.

A model (an embedder's network, a spaCy pipeline) loads once per process, lazily, inside
whatever first uses it: a query stage or an indexing phase. Plugins wrap the load in
:func:`loading_model`; the query runner and the indexer time their stages and phases with
:func:`watch_model_loads`, take the loading out of that time and report each load on its
own line (a ``model_load`` entry in the query trace, ``models`` in the index report).

The watch is a context variable, so a load is charged to the block that triggered it: a
parallel branch's stage, or a stage's worker thread started with ``asyncio.to_thread``.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field


@dataclass(frozen=True)
class ModelLoad:
    """One model loaded: its name (what the plugin calls it) and the wall seconds."""

    name: str
    seconds: float


@dataclass
class LoadWatch:
    """The model loads inside a block and the block's wall time without them."""

    loads: list[ModelLoad] = field(default_factory=list)
    started: float = field(default_factory=time.perf_counter)
    ended: float | None = None

    @property
    def load_seconds(self) -> float:
        return sum(x.seconds for x in self.loads)

    @property
    def seconds(self) -> float:
        """Wall seconds of the block less the model loading inside it."""
        end = self.ended if self.ended is not None else time.perf_counter()
        return max(0.0, end - self.started - self.load_seconds)


_WATCH: ContextVar[LoadWatch | None] = ContextVar("graphroute_model_loads", default=None)
_LOADING: ContextVar[bool] = ContextVar("graphroute_model_loading", default=False)


@contextmanager
def loading_model(name: str) -> Iterator[None]:
    """Time the block as the loading of model ``name`` (a nested load counts once)."""
    if _LOADING.get():
        yield
        return
    token = _LOADING.set(True)
    t = time.perf_counter()
    try:
        yield
    finally:
        _LOADING.reset(token)
        watch = _WATCH.get()
        if watch is not None:
            watch.loads.append(ModelLoad(name, time.perf_counter() - t))


@contextmanager
def watch_model_loads() -> Iterator[LoadWatch]:
    """Collect the model loads inside the block; an enclosing watch sees them too."""
    outer = _WATCH.get()
    watch = LoadWatch()
    token = _WATCH.set(watch)
    try:
        yield watch
    finally:
        watch.ended = time.perf_counter()
        _WATCH.reset(token)
        if outer is not None:
            outer.loads.extend(watch.loads)
