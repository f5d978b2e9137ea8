"""Progress bars for long steps (load, parse, embed, edges, benchmarks).

One helper so every long loop looks the same; bars go to stderr so ``--json`` output on
stdout stays machine-readable, and they disappear when ``GRAPHROUTE_PROGRESS=0``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import TypeVar

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
    return os.environ.get("GRAPHROUTE_PROGRESS", "1") not in ("0", "false", "no") and sys.stderr is not None


class Bar:
    """A handle to advance one task of a progress display."""

    def __init__(self, progress: Progress | None, task: TaskID | None) -> None:
        self._progress = progress
        self._task = task

    def advance(self, n: float = 1) -> None:
        if self._progress is not None and self._task is not None:
            self._progress.advance(self._task, n)

    def update(self, *, total: float | None = None, description: str | None = None) -> None:
        if self._progress is not None and self._task is not None:
            self._progress.update(self._task, total=total, description=description)


@contextmanager
def bar(description: str, total: float | None) -> Iterator[Bar]:
    """``with bar("embed sentences", n) as b: ... b.advance(k)``."""
    if not enabled():
        yield Bar(None, None)
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
        yield Bar(progress, task)


def track(items: Iterable[T], description: str, total: int | None = None) -> Iterator[T]:
    """Iterate with a bar."""
    if total is None and hasattr(items, "__len__"):
        total = len(items)  # type: ignore[arg-type]
    with bar(description, total) as b:
        for item in items:
            yield item
            b.advance()
