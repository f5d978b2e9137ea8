"""Progress bars for long steps (load, parse, embed, edges, benchmarks).

One helper so every long loop looks the same; bars go to stderr so ``--json`` output on
stdout stays machine-readable, and they disappear when ``GRAPHROUTE_PROGRESS=0``.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import TypeVar

from graphroute.core.api.values import env_flag
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

T = TypeVar("T")

_console = Console(stderr=True)


def enabled() -> bool:
    return env_flag("GRAPHROUTE_PROGRESS", default=True) and sys.stderr is not None


ProgressListener = Callable[[str, float, float | None], None]
_listeners = threading.local()


@contextmanager
def _held(slot: threading.local, callback: object) -> Iterator[None]:
    """``slot.callback`` set to ``callback`` for the block, then restored."""
    previous = getattr(slot, "callback", None)
    slot.callback = callback
    try:
        yield
    finally:
        slot.callback = previous


def listen(callback: ProgressListener) -> AbstractContextManager[None]:
    """Report every bar opened by *this thread* to ``callback(description, completed, total)``,
    whether or not bars are displayed: how the HTTP server's index jobs report progress."""
    return _held(_listeners, callback)


_meters = threading.local()


def meter(callback: Callable[[float], None]) -> AbstractContextManager[None]:
    """Send this thread's :func:`work_done` calls to ``callback`` for the block: how a long
    call into a component (the segmenter on a document of megabytes) moves its caller's bar
    while it works, without opening a display of its own (rich shows one at a time)."""
    return _held(_meters, callback)


def work_done(amount: float) -> None:
    """Report ``amount`` units of work done to the enclosing :func:`meter` (none: nothing)."""
    callback = getattr(_meters, "callback", None)
    if callback is not None:
        callback(amount)


class Bar:
    """A handle to advance one task of a progress display."""

    def __init__(
        self, progress: Progress | None, task: TaskID | None, description: str = "", total: float | None = None
    ) -> None:
        self._progress = progress
        self._task = task
        self._description = description
        self._total = total
        self._completed = 0.0
        self._listener: ProgressListener | None = getattr(_listeners, "callback", None)
        self._notify()

    def _notify(self) -> None:
        if self._listener is not None:
            self._listener(self._description, self._completed, self._total)

    def advance(self, n: float = 1) -> None:
        self._completed += n
        self._notify()
        if self._progress is not None and self._task is not None:
            self._progress.advance(self._task, n)

    def update(self, *, total: float | None = None, description: str | None = None) -> None:
        if total is not None:
            self._total = total
        if description is not None:
            self._description = description
        self._notify()
        if self._progress is not None and self._task is not None:
            self._progress.update(self._task, total=total, description=description)


@contextmanager
def bar(description: str, total: float | None) -> Iterator[Bar]:
    """``with bar("embed sentences", n) as b: ... b.advance(k)``."""
    if not enabled():
        yield Bar(None, None, description, total)
        return
    progress = Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=_console,
        transient=False,
    )
    with progress:
        task = progress.add_task(description, total=total)
        yield Bar(progress, task, description, total)


def track(items: Iterable[T], description: str, total: int | None = None) -> Iterator[T]:
    """Iterate with a bar."""
    if total is None and hasattr(items, "__len__"):
        total = len(items)  # type: ignore[arg-type]
    with bar(description, total) as b:
        for item in items:
            yield item
            b.advance()
