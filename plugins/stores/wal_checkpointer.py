"""Checkpoints of an SQLite write-ahead log, run on a thread of their own.

Under WAL a commit appends the transaction's pages to the log; a *checkpoint* later copies
them into the database file and syncs both. SQLite's default runs that checkpoint inside
the committing call once the log passes 1,000 pages (4 MiB), and one index batch writes
more than that, so every batch would wait for a copy and two fsyncs: 3.59 s of 5.78 s in
``graphroute perf``'s write part (20,000 sentences), which takes 2.43 s with checkpoints
off. Here the store's connections never checkpoint; this
thread does, after each commit, while the writer prepares and writes the next batch (the
sqlite3 module releases the GIL while SQLite works, so the copy runs on the second core).

A checkpoint that runs alongside a writer is always a commit behind, and SQLite restarts
the log from its beginning only when a new write finds every frame copied. So a writer
that finds the log past its limit first waits for the thread to catch up (:meth:`wait_if_full`);
its transaction then restarts the log, and ``journal_size_limit`` (set by the store)
truncates the file back to the limit. The writer compares the length the last pass saw, so
the commits made while a pass copies can take the log past the limit before a writer waits:
``graphroute perf``'s write part (20,000 sentences) leaves a log file of up to ~165-180 MB
against the 64 MiB limit. A reader that pins older
frames (another process holding a long read transaction) lets the log grow until it ends,
as it does with SQLite's default.

Durability is unchanged: a commit is in the log (synchronous=NORMAL: survives a process
crash; FULL: also a power loss) before the call returns, whether or not it was copied yet.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import Callable

log = logging.getLogger(__name__)


class WalCheckpointer:
    """One background thread that checkpoints a database's log after each commit.

    ``connect`` opens a new connection to the database (the thread's own); ``limit_pages``
    is the log length (in pages) past which :meth:`wait_if_full` makes a writer wait;
    ``gone`` says whether the database file was deleted while open, in which case a failing
    connection or pass just ends the thread (there is nothing left to copy into, and the
    store's close says so once). The thread starts at the first commit, so a store that only
    reads never starts one."""

    def __init__(
        self, connect: Callable[[], sqlite3.Connection], limit_pages: int, gone: Callable[[], bool] = lambda: False
    ) -> None:
        self._connect = connect
        self._limit_pages = limit_pages
        self._gone = gone
        self._cond = threading.Condition()
        self._pending = False  # a commit since the current or last pass began
        self._running = False  # a pass is copying now
        self._stopped = False
        self._log_pages = 0  # the log's length, in pages, as the last pass saw it
        self._thread: threading.Thread | None = None

    def committed(self) -> None:
        """Called after each write commit: a pass will copy it."""
        with self._cond:
            if self._stopped:
                return
            self._pending = True
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="graphroute-checkpoint", daemon=True)
                self._thread.start()
            self._cond.notify_all()

    def wait_if_full(self) -> None:
        """Called before a write transaction: when the log is past the limit, wait until the
        thread has copied every commit, so this transaction restarts the log."""
        with self._cond:
            if self._log_pages < self._limit_pages:
                return
            self._cond.wait_for(self._idle)
            # this writer's transaction restarts the log (unless a reader pins it; the next
            # pass then reports the length again)
            self._log_pages = 0

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Wait until every commit so far has been through a pass; False on timeout."""
        with self._cond:
            return self._cond.wait_for(self._idle, timeout)

    def close(self) -> None:
        """Stop the thread after its current pass (the next connection close checkpoints
        whatever is left, as SQLite does when a database's last connection closes)."""
        with self._cond:
            self._stopped = True
            thread = self._thread
            self._cond.notify_all()
        if thread is not None:
            thread.join()

    def _idle(self) -> bool:
        return self._stopped or not (self._pending or self._running)

    def _run(self) -> None:
        try:
            conn = self._connect()
            try:
                self._passes(conn)
            finally:
                conn.close()
        except Exception:  # a writer must never wait on a thread that is gone
            if not self._gone():
                log.exception("the WAL checkpoint thread stopped; commits now checkpoint past twice the limit")
        finally:
            with self._cond:
                self._stopped = True
                self._running = False
                self._cond.notify_all()

    def _passes(self, conn: sqlite3.Connection) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._pending or self._stopped)
                if self._stopped:
                    return
                self._pending = False
                self._running = True
            log_pages = self._log_pages
            try:
                # PASSIVE: copy what no reader still needs, never wait for a lock
                ((_busy, log_pages, _copied),) = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
            except sqlite3.Error as exc:  # disk full, I/O error: the next commit tries again
                if self._gone():
                    return
                log.warning("WAL checkpoint failed: %s", exc)
            with self._cond:
                self._running = False
                self._log_pages = max(log_pages, 0)
                self._cond.notify_all()
