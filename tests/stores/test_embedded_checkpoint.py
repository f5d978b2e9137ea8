"""The embedded store's write-ahead log: checkpointed beside the writer, and bounded.

Commits do not copy the log into the database file themselves; the store's
``WalCheckpointer`` thread does (plugins/stores/wal_checkpointer.py). These tests pin what
that must still guarantee: committed writes reach the database file without a close, a
writer past the log's limit waits for the thread so the log restarts, the log file is cut
back to its limit afterwards, and a reader holding an old snapshot neither blocks the
writer nor sees its writes.
"""

from __future__ import annotations

import logging
import shutil
import sqlite3
import threading
from pathlib import Path

import numpy as np
import pytest
from graphroute.core.api.models import Label, Node, VectorSpace
from graphroute.plugins.stores.embedded import DB_FILE, EmbeddedStore
from graphroute.plugins.stores.wal_checkpointer import WalCheckpointer

GROUP = "g"
DIM = 64


def batch(start: int, n: int) -> tuple[list[Node], dict[str, tuple[list[str], np.ndarray]]]:
    ids = [f"s{i}" for i in range(start, start + n)]
    nodes = [Node(id=i, label=Label.SENTENCE, group=GROUP, doc_id=f"d{start}", props={"text": f"sentence {i} " * 20})
             for i in ids]
    return nodes, {VectorSpace.SENTENCE: (ids, np.ones((n, DIM), dtype=np.float32))}


def rows_in_database_file(store_dir: Path) -> int:
    """Sentences in the database file alone: ``immutable=1`` makes SQLite ignore the log."""
    uri = f"file:{store_dir / DB_FILE}?immutable=1"
    with sqlite3.connect(uri, uri=True) as conn:
        return int(conn.execute("SELECT count(*) FROM nodes WHERE label = ?", (Label.SENTENCE.value,)).fetchone()[0])


def test_commits_reach_the_database_file_while_the_store_stays_open(tmp_path: Path) -> None:
    # small writes: SQLite's own checkpoint (every 1,000 log pages) would leave them in the log
    store = EmbeddedStore(str(tmp_path))
    try:
        for k in range(5):
            nodes, vecs = batch(10 * k, 10)
            store.write(GROUP, nodes, vectors=vecs)
        assert store._checkpointer.wait_idle(timeout=60)
        assert rows_in_database_file(tmp_path) == 50
        assert store.counts(GROUP)["nodes"]["Sentence"] == 50
    finally:
        store.close()


def test_a_long_write_leaves_the_log_file_cut_back_to_its_limit(tmp_path: Path) -> None:
    limit = 256 * 1024
    store = EmbeddedStore(str(tmp_path), log_limit_bytes=limit)
    wal = tmp_path / (DB_FILE + "-wal")
    try:
        for k in range(6):  # ~0.8 MB of rows each
            nodes, vecs = batch(1000 * k, 1000)
            store.write(GROUP, nodes, vectors=vecs)
        longest = wal.stat().st_size
        assert store._checkpointer.wait_idle(timeout=60)
        nodes, vecs = batch(10**6, 5)
        store.write(GROUP, nodes, vectors=vecs)  # everything was copied: this write restarts the log
        after = wal.stat().st_size
        assert store.counts(GROUP)["nodes"]["Sentence"] == 6005
    finally:
        store.close()
    assert longest > 2 * limit
    assert after <= limit


def test_a_reader_pinning_old_frames_neither_blocks_writes_nor_sees_them(tmp_path: Path) -> None:
    store = EmbeddedStore(str(tmp_path), log_limit_bytes=64 * 1024)
    nodes, vecs = batch(0, 100)
    store.write(GROUP, nodes, vectors=vecs)
    pinned = threading.Event()
    release = threading.Event()
    seen: list[int] = []

    def reader() -> None:
        other = EmbeddedStore(str(tmp_path))
        try:
            with other._snapshot() as conn:  # one read transaction, held open
                seen.append(conn.execute("SELECT count(*) FROM nodes").fetchone()[0])
                pinned.set()
                release.wait(timeout=120)
                seen.append(conn.execute("SELECT count(*) FROM nodes").fetchone()[0])
        finally:
            other.close()

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        assert pinned.wait(timeout=60)
        for k in range(1, 21):  # far past the 64 kB limit: writers wait for the thread, never for the reader
            nodes, vecs = batch(100 * k, 100)
            store.write(GROUP, nodes, vectors=vecs)
        assert store.counts(GROUP)["nodes"]["Sentence"] == 2100
    finally:
        release.set()
        thread.join(timeout=120)
        store.close()
    assert seen == [100, 100]


def test_a_writer_past_the_limit_waits_for_the_pass_over_the_last_commit(tmp_path: Path) -> None:
    # Real SQLite; the checkpoint thread's connection is held at a gate (a progress handler,
    # called between the checkpoint statement's steps) so the test decides when a pass ends.
    db = str(tmp_path / "log.sqlite")
    writer = sqlite3.connect(db, isolation_level=None, check_same_thread=False)
    writer.execute("PRAGMA journal_mode=WAL")
    writer.execute("PRAGMA wal_autocheckpoint=0")
    writer.execute("CREATE TABLE t (x BLOB)")
    gate = threading.Event()
    gate.set()

    def gated_connect() -> sqlite3.Connection:
        conn = sqlite3.connect(db, isolation_level=None, check_same_thread=False)
        conn.set_progress_handler(lambda: 0 if gate.wait(timeout=120) else 1, 1)
        return conn

    def commit(kb: int) -> None:
        writer.execute("INSERT INTO t VALUES (randomblob(?))", (kb * 1024,))

    def log_frames() -> int:
        with sqlite3.connect(db) as probe:  # PASSIVE with nothing left to copy: just the length
            return int(probe.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()[0][1])

    checkpointer = WalCheckpointer(gated_connect, limit_pages=8)
    try:
        commit(200)  # ~50 pages: past the limit
        checkpointer.committed()
        assert checkpointer.wait_idle(timeout=60)
        gate.clear()
        commit(200)
        checkpointer.committed()  # this pass is held at the gate
        waited = threading.Event()
        threading.Thread(target=lambda: (checkpointer.wait_if_full(), waited.set())).start()
        assert not waited.wait(timeout=0.5)  # the writer waits while the pass is held
        gate.set()
        assert waited.wait(timeout=60)
        commit(1)  # every frame was copied: this commit restarts the log from its start
        assert log_frames() <= 2
    finally:
        gate.set()
        checkpointer.close()
        writer.close()


def test_a_store_deleted_while_open_closes_with_one_line_and_no_traceback(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # the checkpoint thread starts at the first commit: deleted before it (its connection
    # cannot open) and deleted after it (its passes find the file gone)
    for started in (False, True):
        folder = tmp_path / f"store-{started}"
        store = EmbeddedStore(str(folder))
        if started:
            nodes, vecs = batch(0, 10)
            store.write(GROUP, nodes, vectors=vecs)
            assert store._checkpointer is not None and store._checkpointer.wait_idle(timeout=60)
        caplog.clear()
        shutil.rmtree(folder)
        nodes, vecs = batch(100, 10)
        store.write(GROUP, nodes, vectors=vecs)  # the open connection still writes, to the deleted file
        assert store._checkpointer is not None and store._checkpointer.wait_idle(timeout=60)
        store.close()
        store.close()  # said once, however often it is closed
        shown = [r for r in caplog.records if r.levelno >= logging.WARNING]
        assert all(r.exc_info is None for r in caplog.records), caplog.text
        assert len(shown) == 1 and "was deleted" in shown[0].getMessage() and str(folder) in shown[0].getMessage(), caplog.text
        assert not folder.exists()


def test_a_store_closed_in_place_says_nothing(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    store = EmbeddedStore(str(tmp_path / "store"))
    nodes, vecs = batch(0, 10)
    store.write(GROUP, nodes, vectors=vecs)
    store.close()
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []
