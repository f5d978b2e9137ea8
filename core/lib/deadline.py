"""The deadline of the query running in this context, and the check that stops it.

A query's work is stopped, not just its answer abandoned: the runner checks the deadline
before every stage, and a stage (or a helper it calls) with a long loop calls
:func:`check_deadline` inside it, so a timed-out query raises
:class:`~graphroute.core.errors.QueryTimeoutError` at its next check and frees its thread.
The deadline lives in a context variable: every stage of one question (parallel branches
included) sees it, other questions on other threads never do.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import NoReturn

from graphroute.core.errors import QueryTimeoutError

_deadline: ContextVar[tuple[float, float] | None] = ContextVar("graphroute_deadline", default=None)


@contextmanager
def deadline_in(seconds: float | None) -> Iterator[None]:
    """Run the block with a deadline ``seconds`` from now (None: no deadline of its own; an
    outer deadline that comes sooner still applies)."""
    if seconds is None:
        yield
        return
    now = time.monotonic()
    current = _deadline.get()
    at = now + max(0.0, seconds)
    token = _deadline.set((at, seconds) if current is None or at < current[0] else current)
    try:
        yield
    finally:
        _deadline.reset(token)


def remaining() -> float | None:
    """Seconds left before the deadline (negative once passed), None without one."""
    current = _deadline.get()
    return None if current is None else current[0] - time.monotonic()


def capped(seconds: float) -> float:
    """A call's own time limit ``seconds``, or what is left before the deadline when that is
    sooner: a remote call given it as its timeout gives the thread back when the query's
    time is up, instead of holding it for the client's whole timeout. Never below a
    millisecond (a deadline already passed is :func:`check_deadline`'s to report)."""
    left = remaining()
    return seconds if left is None else max(min(seconds, left), 0.001)


def check_deadline(where: str = "") -> None:
    """Raise :class:`QueryTimeoutError` when the deadline has passed (cheap: one clock read)."""
    current = _deadline.get()
    if current is not None and time.monotonic() >= current[0]:
        timed_out(where)


def timed_out(where: str = "") -> NoReturn:
    """Raise :class:`QueryTimeoutError` for the current deadline: for work that was given
    :func:`remaining` as its own time limit and ran out of it (the clock may read a hair
    before the deadline then)."""
    current = _deadline.get()
    at = f" (stopped at {where})" if where else ""
    limit = f"its {current[1]:g} s time limit" if current is not None else "its time limit"
    raise QueryTimeoutError(f"the query took longer than {limit}{at}")
