"""The embedded store: a directory on disk, no server.

Why SQLite: it gives atomic, crash-safe transactions (a ``kill -9`` mid-write rolls back to
the previous commit on the next open), concurrent readers while one writer writes (WAL
mode), and B-tree indexes for the lookups routes make, all in the Python standard library.

Layout of ``<dir>/graph.sqlite``:

* ``nodes(grp, id, label, doc_id, props)`` - props as JSON text.
* ``edges(grp, src, type, dst, doc_id, props)`` - an edge is identified by
  ``(grp, src, type, dst)``: writing it again updates its properties instead of duplicating
  it, so re-running an index step never doubles graph weights. Edges whose endpoints are not
  nodes of the group are skipped (no dangling edges; the Neo4j backend behaves the same).
* ``vectors(grp, space, id, vec)`` - float32 BLOBs written in the same transaction as the
  nodes, so vectors and nodes can never disagree after a crash. A vector belongs to a node:
  vectors for ids that are not nodes of the group are skipped (as in Neo4j, where vectors
  are node properties) and go when their node goes. Searches run on an
  in-memory numpy matrix per (group, space), loaded lazily and dropped when the group's
  version changes (also when another process wrote).
* ``groups(grp, version)`` and ``meta(grp, key, value)``. Versions come from one global
  counter, so they only ever grow, even across ``delete_group`` (a cache keyed on an old
  version can never match again).

``<dir>/index-<hash of a group>.lock``: the group's index lock (:meth:`EmbeddedStore.index_lock`).

Property lookup (``find_nodes``): expression indexes on ``json_extract(props, '$.<p>')`` for
the props routes look up by value (``name``, ``norm``, ``path``, ``title``, ``doc_id``,
``alias``). An expression index needs no extra table to keep in sync (a side table of
(prop, value) rows would double the write work for every node) and SQLite keeps it inside
the same transaction. Other props fall back to the (grp, label) index plus a filter.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import re
import sqlite3
import threading
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any, Concatenate, Literal, ParamSpec, TypeVar

import numpy as np
from filelock import FileLock, Timeout
from graphroute.core.api.components import ComponentParams, StoreBackend
from graphroute.core.api.models import Edge, Label, Node
from graphroute.core.api.neighbourhood import NeighbourCounts, Neighbourhood, TypeDegrees
from graphroute.core.api.store import (
    Direction,
    GraphStore,
    MetaPatch,
    VectorBatch,
    batched,
    checked_vectors,
    dump_props,
    load_props,
    looks_like_server_address,
    nodes_equal_to,
    patched_meta,
    read_version,
    title_key,
)
from graphroute.core.errors import GroupBusyError, StoreDamagedError, StoreError, StoreLocationError
from graphroute.core.hookspecs import hookimpl
from graphroute.core.lib.embed_cache import enable_wal
from graphroute.core.lib.vector_matrix import VectorMatrix
from graphroute.plugins.stores.wal_checkpointer import WalCheckpointer
from pydantic import Field

log = logging.getLogger(__name__)

DB_FILE = "graph.sqlite"
# Props with an expression index; keep in sync with _SCHEMA below.
INDEXED_PROPS: tuple[str, ...] = ("name", "norm", "path", "title", "alias")
_CHUNK = 500  # bound parameters per IN (...) list, far below SQLite's limit
# rows fetched at a time by the whole-group scans (iter_nodes, iter_edges); see _scan
_FETCH = 2048

T = TypeVar("T")
P = ParamSpec("P")
_URI_RE = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*://")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS counter (k INTEGER PRIMARY KEY CHECK (k = 0), value INTEGER NOT NULL);
INSERT OR IGNORE INTO counter (k, value) VALUES (0, 0);
CREATE TABLE IF NOT EXISTS groups (grp TEXT PRIMARY KEY, version INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS meta (
    grp TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL, PRIMARY KEY (grp, key)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS nodes (
    grp TEXT NOT NULL, id TEXT NOT NULL, label TEXT NOT NULL, doc_id TEXT, props TEXT,
    PRIMARY KEY (grp, id)
);
CREATE INDEX IF NOT EXISTS nodes_label ON nodes (grp, label);
CREATE INDEX IF NOT EXISTS nodes_doc ON nodes (grp, doc_id);
CREATE INDEX IF NOT EXISTS nodes_p_name ON nodes (grp, label, json_extract(props, '$.name'));
CREATE INDEX IF NOT EXISTS nodes_p_norm ON nodes (grp, label, json_extract(props, '$.norm'));
CREATE INDEX IF NOT EXISTS nodes_p_path ON nodes (grp, label, json_extract(props, '$.path'));
CREATE INDEX IF NOT EXISTS nodes_p_title ON nodes (grp, label, json_extract(props, '$.title'));
CREATE INDEX IF NOT EXISTS nodes_p_alias ON nodes (grp, label, json_extract(props, '$.alias'));
CREATE TABLE IF NOT EXISTS edges (
    grp TEXT NOT NULL, src TEXT NOT NULL, type TEXT NOT NULL, dst TEXT NOT NULL,
    doc_id TEXT, props TEXT,
    UNIQUE (grp, src, type, dst)
);
CREATE INDEX IF NOT EXISTS edges_dst ON edges (grp, dst);
CREATE INDEX IF NOT EXISTS edges_type ON edges (grp, type);
CREATE INDEX IF NOT EXISTS edges_doc ON edges (grp, doc_id);
CREATE TABLE IF NOT EXISTS vectors (
    grp TEXT NOT NULL, space TEXT NOT NULL, id TEXT NOT NULL, vec BLOB NOT NULL,
    UNIQUE (grp, space, id)
);
CREATE INDEX IF NOT EXISTS vectors_id ON vectors (grp, id);
CREATE TABLE IF NOT EXISTS spaces (
    grp TEXT NOT NULL, space TEXT NOT NULL, dim INTEGER NOT NULL, PRIMARY KEY (grp, space)
) WITHOUT ROWID;
"""
# The UNIQUE (grp, src, type, dst) index also serves "edges by source" lookups.
# vectors is a rowid table with a UNIQUE key, not WITHOUT ROWID: a WITHOUT ROWID table keeps
# whole rows in its key B-tree, and a 384-d float32 row (1.5 kB) fits two to a page, so
# every insert in key order split pages and moved BLOBs (graphroute perf's write part: about
# 15% faster as a rowid table). Stores created before keep their table; both work alike.


def _open_mode(folder: Path, db: Path) -> Literal["read-write", "read-only"]:
    """How a store at ``folder`` opens: read-write when this process can write there
    (creating the folder if needed); read-only when a store exists but cannot be written;
    a StoreLocationError (a user error, exit 2) when there is no store to read and none can
    be made, or the location is a file."""
    if folder.exists() and not folder.is_dir():
        raise StoreLocationError(f"store location {str(folder)!r} is a file; the embedded store is a folder")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StoreLocationError(f"cannot create the store folder {str(folder)!r}: {exc.strerror or exc}") from None
    writable = os.access(folder, os.W_OK | os.X_OK) and (not db.exists() or os.access(db, os.W_OK))
    if writable:
        return "read-write"
    if db.is_file() and os.access(db, os.R_OK):
        return "read-only"
    raise StoreLocationError(f"cannot create a store in {str(folder)!r}: the folder is not writable")


def _failure(db: str, exc: sqlite3.Error, doing: str) -> StoreError:
    """The StoreError a user sees for a SQLite error: ``doing`` (e.g. "reading") failed in
    the database file ``db``; a file SQLite finds damaged (SQLITE_CORRUPT, SQLITE_NOTADB)
    says what to do instead, since retrying cannot help."""
    if str(getattr(exc, "sqlite_errorname", "")).startswith(("SQLITE_CORRUPT", "SQLITE_NOTADB")):
        return StoreDamagedError(
            f"the embedded store file {db!r} is damaged ({exc}): what it holds cannot be read reliably; "
            "restore the store folder from a backup, or delete it and index the documents again"
        )
    return StoreError(f"{doing} the embedded store {db!r} failed: {exc}")


def _reads(method: Callable[Concatenate[EmbeddedStore, P], T]) -> Callable[Concatenate[EmbeddedStore, P], T]:
    """A read method whose SQLite errors reach the caller as StoreErrors naming the file."""

    @functools.wraps(method)
    def read(self: EmbeddedStore, *args: P.args, **kwargs: P.kwargs) -> T:
        try:
            return method(self, *args, **kwargs)
        except sqlite3.Error as exc:
            raise _failure(self._db, exc, "reading") from exc

    return read


def _chunks(seq: Sequence[Any], size: int = _CHUNK) -> Iterator[Sequence[Any]]:
    return batched(seq, size)


# Edges looked up by a list of endpoint ids read the index that starts with that endpoint.
# Without statistics SQLite's planner reads ``dst IN (...)`` through the (grp, src, type,
# dst) key or the (grp, type) index instead, i.e. every edge of the group or of the type
# (measured on MuSiQue's 350k edges: 500 entities' incoming MENTIONS 0.29 s that way,
# 0.05 s through edges_dst; the communities step's document counts 5.1 CPU s, now 0.7).
_BY_COLUMN = {"src": "", "dst": " INDEXED BY edges_dst"}


def _marks(n: int) -> str:
    return ",".join("?" * n)


class EmbeddedStore(GraphStore):
    """SQLite + numpy graph store in one directory (see the module docstring)."""

    backend = "embedded"

    def __init__(
        self,
        location: str,
        *,
        busy_timeout_s: float = 60.0,
        synchronous: str = "NORMAL",
        log_limit_bytes: int = 64 * 1024 * 1024,
    ) -> None:
        self.location = location
        self.path = Path(location)
        self._db = str(self.path / DB_FILE)
        # a store whose folder or file this process cannot write opens for reading only
        self.read_only = _open_mode(self.path, Path(self._db)) == "read-only"
        self._timeout = busy_timeout_s
        self._synchronous = synchronous
        self._log_limit_bytes = log_limit_bytes
        self._log_limit_pages = 0  # the limit in the database's pages, read by the first _conn
        self._local = threading.local()
        self._conns: list[sqlite3.Connection] = []
        self._conns_lock = threading.Lock()
        self._write_lock = threading.Lock()
        self._spaces: dict[tuple[str, str], tuple[int, VectorMatrix]] = {}  # by (group, space): version, matrix
        self._spaces_lock = threading.Lock()
        self._closed = False
        if self.read_only:
            self._conn().execute("SELECT 1 FROM groups LIMIT 1")  # a store it can read, or the error now
            self._checkpointer: WalCheckpointer | None = None
            return
        with self._write_lock:
            conn = self._conn()
            conn.executescript("BEGIN IMMEDIATE;" + _SCHEMA + "COMMIT;")
        # checkpoints run beside the writer, not in its commits (see wal_checkpointer)
        self._checkpointer = WalCheckpointer(self._connect, self._log_limit_pages, self._gone)

    # ------------------------------------------------------------------ connections
    def _connect(self) -> sqlite3.Connection:
        """A new connection in autocommit mode (transactions are begun explicitly), usable
        from any thread, waiting up to the store's busy timeout for a lock."""
        if self.read_only:
            # mode=ro reads a live log (its -shm must exist, as it does while a writer has the
            # store open); a store closed cleanly has none and is read as immutable
            live = os.path.exists(self._db + "-wal") and os.path.exists(self._db + "-shm")
            uri = f"{Path(self._db).absolute().as_uri()}?{'mode=ro' if live else 'immutable=1'}"
            return sqlite3.connect(uri, uri=True, timeout=self._timeout, isolation_level=None, check_same_thread=False)
        return sqlite3.connect(self._db, timeout=self._timeout, isolation_level=None, check_same_thread=False)

    def _conn(self) -> sqlite3.Connection:
        """One connection per thread: WAL lets each read a consistent snapshot while another
        thread or process writes."""
        if self._closed:
            raise StoreError(f"store {self.location!r} is closed")
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            try:
                conn = self._connect()
                if not self.read_only:
                    enable_wal(conn, self._timeout)
                # NORMAL by default: under WAL a commit is appended to the log without an
                # fsync (the log is synced at checkpoints), so a commit survives the process
                # dying at any point (kill -9: the reliability suite tests it) and only a
                # power loss or OS crash may roll back the last commits - never corrupt the
                # file. FULL (a Params option) also syncs every commit.
                conn.execute(f"PRAGMA synchronous={self._synchronous}")
                conn.execute("PRAGMA foreign_keys=OFF")
                conn.execute("PRAGMA cache_size=-65536")  # 64 MiB page cache
                conn.execute("PRAGMA temp_store=MEMORY")
                # a listing's title order, the same function as every backend's (document_page)
                conn.create_function("gr_title_key", 1, title_key, deterministic=True)
                # commits leave checkpoints to the store's WalCheckpointer; this connection
                # checkpoints itself only past twice the log limit, i.e. only when that thread
                # could not start or fall behind. A restarted log is cut back to the limit.
                if not self._log_limit_pages:  # a database's page size never changes
                    page_size = conn.execute("PRAGMA page_size").fetchone()[0]
                    self._log_limit_pages = max(1, self._log_limit_bytes // page_size)
                conn.execute(f"PRAGMA wal_autocheckpoint={2 * self._log_limit_pages}")
                conn.execute(f"PRAGMA journal_size_limit={self._log_limit_bytes}")
            except sqlite3.Error as exc:
                raise self._opening_failure(exc) from exc
            self._local.conn = conn
            with self._conns_lock:
                self._conns.append(conn)
        return conn

    @contextmanager
    def _write(self, group: str) -> Iterator[sqlite3.Connection]:
        """One IMMEDIATE transaction that bumps the group's version; all or nothing."""
        if self._checkpointer is None:
            raise StoreLocationError.read_only(repr(self.location), "changed", "its folder or database file cannot be written")
        with self._write_lock:
            conn = self._conn()
            self._checkpointer.wait_if_full()
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
                conn.execute("UPDATE counter SET value = value + 1 WHERE k = 0")
                conn.execute(
                    "INSERT INTO groups (grp, version) VALUES (?, (SELECT value FROM counter WHERE k = 0)) "
                    "ON CONFLICT (grp) DO UPDATE SET version = excluded.version",
                    (group,),
                )
                conn.execute("COMMIT")
            except sqlite3.Error as exc:
                # SQLite may already have rolled back (disk full, I/O error): a second
                # ROLLBACK would fail and hide the real cause behind "no transaction is active"
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise _failure(self._db, exc, "writing to") from exc
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            self._checkpointer.committed()

    @contextmanager
    def _snapshot(self) -> Iterator[sqlite3.Connection]:
        """A read transaction: several SELECTs see the same committed state."""
        conn = self._conn()
        if conn.in_transaction:  # nested use inside a write or another snapshot
            yield conn
            return
        conn.execute("BEGIN")
        try:
            yield conn
        finally:
            conn.execute("COMMIT")

    def _scan(self, sql: str, args: Sequence[Any], make: Callable[[tuple[Any, ...]], T]) -> Iterator[T]:
        """The rows of a whole-group scan (iter_nodes, iter_edges), made into objects a batch
        at a time, read on a connection of the scan's own.

        Why not ``fetchall``: a scan of a large group's edges (635k MENTIONS at 100k
        sentences) held every row tuple at once, ~200 MB for 354k edges, and the strings a
        caller kept from them (node ids) pinned that heap afterwards: exporting one adjacency
        left ~240 MB resident for 17 MB of live objects. A batch at a time reuses the memory.

        Why its own connection: an open statement holds its connection's read snapshot until
        its last row. On the thread's shared connection, a scan left half-read would make
        that thread's later reads miss newer commits and its next write fail ("database is
        locked": SQLite refuses to write from a stale snapshot). Here the snapshot is the
        scan's alone: it sees the group as it was at the call, whatever commits meanwhile
        (WAL), and is let go when the scan ends or is dropped."""
        if self._closed:
            raise StoreError(f"store {self.location!r} is closed")
        try:
            conn = self._connect()
        except sqlite3.Error as exc:
            raise self._opening_failure(exc) from exc
        try:
            cursor = conn.execute(sql, args)  # the snapshot starts here, at the call
        except sqlite3.Error as exc:
            conn.close()  # not left open until the collector finds it
            raise _failure(self._db, exc, "reading") from exc

        def rows() -> Iterator[T]:
            try:
                while batch := _fetch(cursor):
                    for row in batch:
                        yield make(row)
            finally:
                conn.close()

        def _fetch(cur: sqlite3.Cursor) -> list[Any]:
            try:
                return cur.fetchmany(_FETCH)
            except sqlite3.Error as exc:
                raise _failure(self._db, exc, "reading") from exc

        return rows()

    def _gone(self) -> bool:
        """True when the database file was deleted (or its folder) while this store had it
        open: SQLite goes on writing the deleted file through the connections already open,
        and nothing new can open it."""
        return not os.path.exists(self._db)

    def _gone_message(self) -> str:
        return f"the store folder {self.location!r} was deleted while this process had it open; what was written to it since is gone"

    def _opening_failure(self, exc: sqlite3.Error) -> StoreError:
        """The error of a new connection that failed: one to a store deleted meanwhile says so."""
        return StoreError(self._gone_message()) if self._gone() else _failure(self._db, exc, "opening")

    def close(self) -> None:
        """Close every connection. A store whose folder was deleted meanwhile closes as one
        that is gone: one warning line, and no checkpoint error from the files it lost."""
        first = not self._closed
        if self._checkpointer is not None:
            self._checkpointer.close()
        with self._conns_lock:
            conns, self._conns = self._conns, []
        self._closed = True
        for conn in conns:
            with suppress(sqlite3.Error):
                conn.close()
        self._spaces.clear()
        if first and self._gone():
            log.warning(self._gone_message())

    # ------------------------------------------------------------------ index runs
    @contextmanager
    def index_lock(self, group: str) -> Iterator[None]:
        """An OS file lock (``filelock``: flock on POSIX) on ``index-<hash of group>.lock``
        in the store folder, one file per group so runs into different groups go on side by
        side. The OS lets go of it when its process ends, even by ``kill -9``: a crashed run
        never leaves the group locked."""
        if self.read_only:  # nothing can be written; the write itself says so
            yield
            return
        name = hashlib.sha1(group.encode("utf-8")).hexdigest()[:16]
        lock = FileLock(str(self.path / f"index-{name}.lock"))
        try:
            lock.acquire(timeout=0)
        except Timeout:
            raise GroupBusyError.for_group(group, repr(self.location)) from None
        except OSError as exc:
            raise StoreError(f"cannot lock group {group!r} in the store folder {self.location!r}: {exc}") from exc
        try:
            yield
        finally:
            lock.release()

    # ------------------------------------------------------------------ groups and metadata
    @_reads
    def groups(self) -> list[str]:
        rows = self._conn().execute(
            "SELECT grp FROM groups g WHERE EXISTS (SELECT 1 FROM nodes n WHERE n.grp = g.grp) "
            "OR EXISTS (SELECT 1 FROM meta m WHERE m.grp = g.grp) "
            "OR EXISTS (SELECT 1 FROM vectors v WHERE v.grp = g.grp) ORDER BY grp"
        ).fetchall()
        return [r[0] for r in rows]

    @_reads
    def get_meta(self, group: str, key: str) -> Any | None:
        row = self._conn().execute(
            "SELECT value FROM meta WHERE grp = ? AND key = ?", (group, key)
        ).fetchone()
        return json.loads(row[0]) if row else None

    def set_meta(self, group: str, key: str, value: Any) -> None:
        with self._write(group) as conn:
            self._set_meta(conn, group, {key: value})

    @staticmethod
    def _set_meta(conn: sqlite3.Connection, group: str, meta: Mapping[str, Any]) -> None:
        """Set ``meta`` in the caller's write transaction; a MetaPatch is merged into the
        stored value read in that same transaction (BEGIN IMMEDIATE holds the database's
        write lock, so no other process writes in between)."""
        meta = dict(meta)
        for key, value in meta.items():
            if isinstance(value, MetaPatch):
                row = conn.execute("SELECT value FROM meta WHERE grp = ? AND key = ?", (group, key)).fetchone()
                meta[key] = patched_meta(json.loads(row[0]) if row else None, value)
        conn.executemany(
            "INSERT INTO meta (grp, key, value) VALUES (?, ?, ?) "
            "ON CONFLICT (grp, key) DO UPDATE SET value = excluded.value",
            [(group, k, json.dumps(v, ensure_ascii=False)) for k, v in meta.items()],
        )

    @_reads
    def version(self, group: str) -> int:
        row = self._conn().execute("SELECT version FROM groups WHERE grp = ?", (group,)).fetchone()
        return int(row[0]) if row else 0

    # ------------------------------------------------------------------ writes
    def write(
        self,
        group: str,
        nodes: Sequence[Node] = (),
        edges: Sequence[Edge] = (),
        vectors: VectorBatch | None = None,
        *,
        replace_doc: str | None = None,
        meta: Mapping[str, Any] | None = None,
    ) -> None:
        for n in nodes:
            if n.group != group:
                raise StoreError(f"node {n.id!r} belongs to group {n.group!r}, not {group!r}")
        for e in edges:
            if e.group != group:
                raise StoreError(f"edge {e.src!r}->{e.dst!r} belongs to group {e.group!r}, not {group!r}")
        batches = self._vector_rows(group, vectors or {})
        with self._write(group) as conn:
            if replace_doc is not None:
                self._delete_doc(conn, group, replace_doc)
            if nodes:
                conn.executemany(
                    "INSERT INTO nodes (grp, id, label, doc_id, props) VALUES (?, ?, ?, ?, ?) "
                    "ON CONFLICT (grp, id) DO UPDATE SET label = excluded.label, "
                    "doc_id = excluded.doc_id, props = excluded.props",
                    [(group, n.id, str(n.label), n.doc_id, dump_props(n.props)) for n in nodes],
                )
            # Rows whose endpoints (owner) are nodes of this same write need no existence
            # check; only the others are checked against the table (an index look-up each).
            written = {n.id for n in nodes}
            if edges:
                rows_e = [(group, e.src, str(e.type), e.dst, e.doc_id, dump_props(e.props)) for e in edges]
                known = [r for r in rows_e if r[1] in written and r[3] in written]
                if known:
                    conn.executemany(
                        "INSERT INTO edges (grp, src, type, dst, doc_id, props) VALUES (?, ?, ?, ?, ?, ?) "
                        "ON CONFLICT (grp, src, type, dst) DO UPDATE SET doc_id = excluded.doc_id, "
                        "props = excluded.props",
                        known,
                    )
                if len(known) < len(rows_e):
                    conn.executemany(
                        "INSERT INTO edges (grp, src, type, dst, doc_id, props) "
                        "SELECT ?1, ?2, ?3, ?4, ?5, ?6 "
                        "WHERE EXISTS (SELECT 1 FROM nodes WHERE grp = ?1 AND id = ?2) "
                        "AND EXISTS (SELECT 1 FROM nodes WHERE grp = ?1 AND id = ?4) "
                        "ON CONFLICT (grp, src, type, dst) DO UPDATE SET doc_id = excluded.doc_id, "
                        "props = excluded.props",
                        [r for r in rows_e if not (r[1] in written and r[3] in written)],
                    )
            for space, dim, rows in batches:
                self._check_dim(conn, group, space, dim)
                own = [r for r in rows if r[2] in written]
                if own:
                    conn.executemany(
                        "INSERT INTO vectors (grp, space, id, vec) VALUES (?, ?, ?, ?) "
                        "ON CONFLICT (grp, space, id) DO UPDATE SET vec = excluded.vec",
                        own,
                    )
                if len(own) < len(rows):
                    conn.executemany(
                        "INSERT INTO vectors (grp, space, id, vec) SELECT ?1, ?2, ?3, ?4 "
                        "WHERE EXISTS (SELECT 1 FROM nodes WHERE grp = ?1 AND id = ?3) "
                        "ON CONFLICT (grp, space, id) DO UPDATE SET vec = excluded.vec",
                        [r for r in rows if r[2] not in written],
                    )
            if meta:
                self._set_meta(conn, group, meta)

    @staticmethod
    def _vector_rows(
        group: str, vectors: VectorBatch
    ) -> list[tuple[str, int, list[tuple[str, str, str, bytes]]]]:
        """Validate and serialise vector batches before the transaction starts."""
        out = []
        for space, (ids, matrix) in vectors.items():
            m = checked_vectors(space, ids, matrix)
            if len(ids) == 0:
                continue
            m = np.ascontiguousarray(m)
            out.append(
                (str(space), m.shape[1], [(group, str(space), i, m[r].tobytes()) for r, i in enumerate(ids)])
            )
        return out

    @staticmethod
    def _check_dim(conn: sqlite3.Connection, group: str, space: str, dim: int) -> None:
        """One dimension per (group, space); an empty space may change it (new embedder)."""
        row = conn.execute(
            "SELECT dim FROM spaces WHERE grp = ? AND space = ?", (group, space)
        ).fetchone()
        if row is not None and int(row[0]) != dim:
            left = conn.execute(
                "SELECT 1 FROM vectors WHERE grp = ? AND space = ? LIMIT 1", (group, space)
            ).fetchone()
            if left is not None:
                raise StoreError(
                    f"space {space!r} of group {group!r} holds {row[0]}-d vectors; got {dim}-d "
                    "(re-index the group to change the embedder)"
                )
        if row is None or int(row[0]) != dim:  # unchanged: no write (one page less per commit)
            conn.execute(
                "INSERT INTO spaces (grp, space, dim) VALUES (?, ?, ?) "
                "ON CONFLICT (grp, space) DO UPDATE SET dim = excluded.dim",
                (group, space, dim),
            )

    @staticmethod
    def _delete_nodes_where(conn: sqlite3.Connection, group: str, where: str, args: Sequence[Any]) -> int:
        """Delete the nodes matching ``where`` with their edges (both ends) and vectors."""
        sub = f"SELECT id FROM nodes WHERE grp = ? AND {where}"
        conn.execute(f"DELETE FROM vectors WHERE grp = ? AND id IN ({sub})", (group, group, *args))
        conn.execute(f"DELETE FROM edges WHERE grp = ? AND src IN ({sub})", (group, group, *args))
        conn.execute(f"DELETE FROM edges WHERE grp = ? AND dst IN ({sub})", (group, group, *args))
        cur = conn.execute(f"DELETE FROM nodes WHERE grp = ? AND {where}", (group, *args))
        return int(cur.rowcount)

    def _delete_doc(self, conn: sqlite3.Connection, group: str, doc_id: str) -> int:
        removed = self._delete_nodes_where(conn, group, "doc_id = ?", (doc_id,))
        conn.execute("DELETE FROM edges WHERE grp = ? AND doc_id = ?", (group, doc_id))
        return removed

    def delete_document(self, group: str, doc_id: str) -> int:
        with self._write(group) as conn:
            return self._delete_doc(conn, group, doc_id)

    def delete_derived(
        self,
        group: str,
        *,
        labels: Collection[str] = (),
        edge_types: Collection[str] = (),
        edge_src_label: str | None = None,
    ) -> None:
        labels = [str(x) for x in labels]
        types = [str(t) for t in edge_types]
        with self._write(group) as conn:
            if labels:
                self._delete_nodes_where(conn, group, f"label IN ({_marks(len(labels))})", labels)
            if types:
                if edge_src_label is None:
                    conn.execute(
                        f"DELETE FROM edges WHERE grp = ? AND type IN ({_marks(len(types))})",
                        (group, *types),
                    )
                else:
                    conn.execute(
                        f"DELETE FROM edges WHERE grp = ? AND type IN ({_marks(len(types))}) "
                        "AND src IN (SELECT id FROM nodes WHERE grp = ? AND label = ?)",
                        (group, *types, group, str(edge_src_label)),
                    )

    def delete_group(self, group: str) -> None:
        with self._write(group) as conn:
            for table in ("edges", "vectors", "nodes", "meta", "spaces"):
                conn.execute(f"DELETE FROM {table} WHERE grp = ?", (group,))

    # ------------------------------------------------------------------ reads
    @staticmethod
    def _node(group: str, row: tuple[Any, ...]) -> Node:
        # (pydantic v2 validation is faster here than model_construct, and keeps types honest)
        return Node(id=row[0], label=row[1], group=group, doc_id=row[2], props=load_props(row[3]))

    @staticmethod
    def _edge(group: str, row: tuple[Any, ...]) -> Edge:
        return Edge(
            src=row[0], type=row[1], dst=row[2], group=group, doc_id=row[3], props=load_props(row[4])
        )

    @_reads
    def get_nodes(self, group: str, ids: Sequence[str]) -> list[Node]:
        ids = list(ids)
        found: dict[str, Node] = {}
        with self._snapshot() as conn:
            for chunk in _chunks(list(dict.fromkeys(ids))):
                for row in conn.execute(
                    f"SELECT id, label, doc_id, props FROM nodes WHERE grp = ? AND id IN ({_marks(len(chunk))})",
                    (group, *chunk),
                ):
                    found[row[0]] = self._node(group, row)
        return [found[i] for i in ids if i in found]

    def iter_nodes(
        self, group: str, label: str | None = None, *, doc_id: str | None = None
    ) -> Iterator[Node]:
        sql = "SELECT id, label, doc_id, props FROM nodes WHERE grp = ?"
        args: list[Any] = [group]
        if label is not None:
            sql += " AND label = ?"
            args.append(str(label))
        if doc_id is not None:
            sql += " AND doc_id = ?"
            args.append(doc_id)
        return self._scan(sql + " ORDER BY id", args, lambda r: self._node(group, r))

    @_reads
    def find_nodes(self, group: str, label: str, prop: str, values: Collection[Any]) -> list[Node]:
        wanted = list(values)
        if not wanted:
            return []
        scalars = [v for v in wanted if isinstance(v, str | int | float) and not isinstance(v, bool)]
        conn = self._conn()
        rows: list[tuple[Any, ...]] = []
        if prop in INDEXED_PROPS and len(scalars) == len(wanted):
            expr = f"json_extract(props, '$.{prop}')"  # prop is from the fixed INDEXED_PROPS
            for chunk in _chunks(list(dict.fromkeys(scalars))):
                rows.extend(
                    conn.execute(
                        f"SELECT id, label, doc_id, props FROM nodes WHERE grp = ? AND label = ? "
                        f"AND {expr} IN ({_marks(len(chunk))})",
                        (group, str(label), *chunk),
                    ).fetchall()
                )
        else:
            rows = conn.execute(
                "SELECT id, label, doc_id, props FROM nodes WHERE grp = ? AND label = ?",
                (group, str(label)),
            ).fetchall()
        # Exact Python equality decides (json_extract would also match a list's JSON text).
        return nodes_equal_to((self._node(group, row) for row in rows), prop, wanted)

    @_reads
    def edges_of(
        self,
        group: str,
        ids: Collection[str],
        types: Collection[str] | None = None,
        direction: Direction = "out",
    ) -> list[Edge]:
        id_list = list(dict.fromkeys(ids))
        if not id_list or (types is not None and not types):
            return []
        type_list = [str(t) for t in types] if types is not None else []
        type_sql = f" AND type IN ({_marks(len(type_list))})" if type_list else ""
        cols = ("src",) if direction == "out" else ("dst",) if direction == "in" else ("src", "dst")
        seen: dict[int, Edge] = {}
        with self._snapshot() as conn:
            for col in cols:
                for chunk in _chunks(id_list):
                    for row in conn.execute(
                        f"SELECT rowid, src, type, dst, doc_id, props FROM edges{_BY_COLUMN[col]} WHERE grp = ? "
                        f"AND {col} IN ({_marks(len(chunk))}){type_sql}",
                        (group, *chunk, *type_list),
                    ):
                        if row[0] not in seen:
                            seen[row[0]] = self._edge(group, row[1:])
        return [seen[k] for k in sorted(seen)]

    def _around(
        self,
        group: str,
        ids: Sequence[str],
        types: Collection[str],
        other_labels: Collection[str] | None,
        labels: dict[str, str],
        columns: str,
    ) -> Iterator[tuple[sqlite3.Connection, str, tuple[Any, ...]]]:
        """Per batch of ``ids``: each id's label into ``labels``, then the connection, a query
        over the batch's edges of ``types`` in both directions (columns ``node``, ``type`` and
        ``columns``, where ``e.{b}`` is the other end and ``n`` its node row) and its arguments.

        Both directions go through their indexes: (grp, src, type, dst) for outgoing edges,
        (grp, dst) for incoming ones (named, see ``_BY_COLUMN``), each joined to the other
        end's node row by its key."""
        id_list = list(dict.fromkeys(ids))
        type_list = [str(t) for t in types]
        label_list = None if other_labels is None else [str(x) for x in other_labels]
        t_sql = _marks(len(type_list))
        l_sql = "" if label_list is None else f" AND n.label IN ({_marks(len(label_list))})"
        if not id_list:
            return
        with self._snapshot() as conn:
            for chunk in _chunks(id_list):
                marks = _marks(len(chunk))
                for row in conn.execute(
                    f"SELECT id, label FROM nodes WHERE grp = ? AND id IN ({marks})", (group, *chunk)
                ):
                    labels[row[0]] = row[1]
                if not type_list:
                    continue
                half = (
                    f"SELECT e.{{a}} AS node, e.type AS type, {columns} "
                    "FROM edges e{by} JOIN nodes n ON n.grp = e.grp AND n.id = e.{b} "
                    f"WHERE e.grp = ? AND e.{{a}} IN ({marks}) AND e.type IN ({t_sql}) AND e.src != e.dst{l_sql}"
                )
                args = (group, *chunk, *type_list, *(label_list or ()))
                sql = (
                    f"{half.format(a='src', b='dst', by=_BY_COLUMN['src'])} UNION ALL "
                    f"{half.format(a='dst', b='src', by=_BY_COLUMN['dst'])}"
                )
                yield conn, sql, (*args, *args)

    @_reads
    def neighbours(
        self,
        group: str,
        ids: Sequence[str],
        types: Collection[str],
        *,
        other_labels: Collection[str] | None = None,
        first_docs: int | None = None,
        far_types: Collection[str] | None = None,
    ) -> Neighbourhood:
        out = Neighbourhood({})  # far stays None: SQLite keeps no degrees per node and type
        columns = "e.{b} AS other, n.label AS label, n.doc_id AS doc"
        for conn, sql, args in self._around(group, ids, types, other_labels, out.labels, columns):
            if first_docs is not None:
                sql = (
                    f"SELECT node, type, other, label, doc FROM (SELECT *, DENSE_RANK() OVER "
                    f"(PARTITION BY node ORDER BY doc) AS k FROM ({sql}) WHERE doc IS NOT NULL) WHERE k <= ?"
                )
                args = (*args, first_docs)
            out.add_rows(conn.execute(sql, args).fetchall())
        return out

    @_reads
    def neighbour_counts(
        self,
        group: str,
        ids: Sequence[str],
        types: Collection[str],
        *,
        other_labels: Collection[str] | None = None,
        limit: int | None = None,
    ) -> NeighbourCounts:
        # counted whole whatever the limit: SQLite counts a node's rows from its index
        out = NeighbourCounts({})
        for conn, sql, args in self._around(group, ids, types, other_labels, out.labels, "n.label AS label"):
            grouped = f"SELECT node, type, label, COUNT(*) FROM ({sql}) GROUP BY node, type, label"
            for node, t, lb, n in conn.execute(grouped, args):
                out.counts.setdefault(node, []).append((t, lb, int(n)))
        return out

    def iter_edges(self, group: str, types: Collection[str] | None = None) -> Iterator[Edge]:
        if types is not None and not types:
            return iter(())
        sql = "SELECT src, type, dst, doc_id, props FROM edges WHERE grp = ?"
        args: list[Any] = [group]
        if types is not None:
            type_list = [str(t) for t in types]
            sql += f" AND type IN ({_marks(len(type_list))})"
            args.extend(type_list)
        return self._scan(sql, args, lambda r: self._edge(group, r))

    # ------------------------------------------------------------------ vectors
    def _space(self, group: str, space: str) -> VectorMatrix:
        """The cached matrix of (group, space), reloaded when the group version moved (the
        version a question read first, within one: :func:`read_version`)."""
        current = read_version(self, group)
        key = (group, str(space))
        with self._spaces_lock:
            cached = self._spaces.get(key)
        if cached is not None and cached[0] == current:
            return cached[1]
        with self._snapshot() as conn:
            row = conn.execute("SELECT version FROM groups WHERE grp = ?", (group,)).fetchone()
            version = int(row[0]) if row else 0
            ids, matrix = self._read_vectors(conn, group, str(space))
        loaded = VectorMatrix.of(ids, matrix)
        with self._spaces_lock:
            self._spaces[key] = (version, loaded)
        return loaded

    @_reads
    def vector_search(
        self,
        group: str,
        space: str,
        vector: np.ndarray,
        k: int,
        *,
        restrict_to: Collection[str] | None = None,
    ) -> list[tuple[str, float]]:
        if k <= 0:
            return []
        sp = self._space(group, space)
        if not sp.ids:
            return []
        q = np.asarray(vector, dtype=np.float32).reshape(-1)
        if q.shape[0] != sp.matrix.shape[1]:
            raise StoreError(
                f"query vector has {q.shape[0]} dimensions; space {space!r} of group {group!r} "
                f"holds {sp.matrix.shape[1]}"
            )
        norm = float(np.linalg.norm(q))
        if norm > 0:
            q = q / norm
        return sp.search(q, k, restrict_to)

    @_reads
    def get_vectors(self, group: str, space: str, ids: Sequence[str]) -> np.ndarray:
        found: dict[str, bytes] = {}
        dim = 0
        with self._snapshot() as conn:
            dim_row = conn.execute(
                "SELECT dim FROM spaces WHERE grp = ? AND space = ?", (group, str(space))
            ).fetchone()
            dim = int(dim_row[0]) if dim_row else 0
            for chunk in _chunks(list(dict.fromkeys(ids))):
                for row in conn.execute(
                    f"SELECT id, vec FROM vectors WHERE grp = ? AND space = ? AND id IN ({_marks(len(chunk))})",
                    (group, str(space), *chunk),
                ):
                    found[row[0]] = row[1]
        out = np.zeros((len(ids), dim), dtype=np.float32)
        for r, i in enumerate(ids):
            blob = found.get(i)
            if blob is not None and len(blob) == 4 * dim:
                out[r] = np.frombuffer(blob, dtype=np.float32)
        return out

    @_reads
    def all_vectors(self, group: str, space: str) -> tuple[list[str], np.ndarray]:
        with self._snapshot() as conn:
            return self._read_vectors(conn, group, str(space))

    @staticmethod
    def _read_vectors(conn: sqlite3.Connection, group: str, space: str) -> tuple[list[str], np.ndarray]:
        """Ids (sorted) and the float32 matrix of a space, filled row by row from the cursor.

        Why not ``fetchall`` + ``b"".join``: that held the rows, the joined bytes and the
        matrix at once - three copies of the space (100k sentences x 384-d: 150 MB each) at
        the peak of every kNN step. Call inside a snapshot, so the count and rows agree."""
        dim_row = conn.execute("SELECT dim FROM spaces WHERE grp = ? AND space = ?", (group, space)).fetchone()
        dim = int(dim_row[0]) if dim_row else 0
        count = int(
            conn.execute("SELECT COUNT(*) FROM vectors WHERE grp = ? AND space = ?", (group, space)).fetchone()[0]
        )
        matrix = np.empty((count, dim), dtype=np.float32)
        ids: list[str] = []
        cur = conn.execute("SELECT id, vec FROM vectors WHERE grp = ? AND space = ? ORDER BY id", (group, space))
        for r, (vid, blob) in enumerate(cur):
            matrix[r] = np.frombuffer(blob, dtype=np.float32)
            ids.append(vid)
        return ids, matrix

    @_reads
    def count_nodes(self, group: str, label: str) -> int:
        row = self._conn().execute("SELECT COUNT(*) FROM nodes WHERE grp = ? AND label = ?", (group, str(label))).fetchone()
        return int(row[0])

    @_reads
    def type_totals(self, group: str, types: Collection[str], labels: Collection[str]) -> TypeDegrees | None:
        # each edge counted at both ends, from the type index, with the end's label
        typed, wanted = [str(t) for t in types], [str(lb) for lb in labels]
        found: dict[str, list[int]] = {}
        if typed and wanted:
            ends = (
                f"SELECT n.label, e.type FROM edges e JOIN nodes n ON n.grp = e.grp AND n.id = e.{end} "
                f"WHERE e.grp = ? AND e.type IN ({_marks(len(typed))}) AND n.label IN ({_marks(len(wanted))})"
                for end in ("src", "dst")
            )
            sql = f"SELECT label, type, COUNT(*) FROM ({' UNION ALL '.join(ends)}) GROUP BY label, type"
            col = {t: j for j, t in enumerate(typed)}
            args = [group, *typed, *wanted]
            for label, t, n in self._conn().execute(sql, args + args):
                found.setdefault(label, [0] * len(typed))[col[t]] += int(n)
        return TypeDegrees.of(typed, {label: (label, counts) for label, counts in found.items()})

    @_reads
    def document_page(self, group: str, limit: int | None, offset: int = 0) -> list[Node]:
        rows = self._conn().execute(
            "SELECT id, label, doc_id, props FROM nodes WHERE grp = ? AND label = ? "
            "ORDER BY gr_title_key(json_extract(props, '$.title')), id LIMIT ? OFFSET ?",
            (group, Label.DOCUMENT.value, -1 if limit is None else limit, offset),
        ).fetchall()
        return [self._node(group, r) for r in rows]

    @_reads
    def counts(self, group: str) -> dict[str, dict[str, int]]:
        with self._snapshot() as conn:
            nodes = conn.execute(
                "SELECT label, COUNT(*) FROM nodes WHERE grp = ? GROUP BY label", (group,)
            ).fetchall()
            edges = conn.execute(
                "SELECT type, COUNT(*) FROM edges WHERE grp = ? GROUP BY type", (group,)
            ).fetchall()
            vecs = conn.execute(
                "SELECT space, COUNT(*) FROM vectors WHERE grp = ? GROUP BY space", (group,)
            ).fetchall()
        return {
            "nodes": {r[0]: int(r[1]) for r in nodes},
            "edges": {r[0]: int(r[1]) for r in edges},
            "vectors": {r[0]: int(r[1]) for r in vecs},
        }


class EmbeddedBackend(StoreBackend):
    """Embedded store: a directory with SQLite (nodes, edges, vectors) and numpy search."""

    name = "embedded"

    class Params(ComponentParams):
        busy_timeout_s: float = Field(
            60.0, ge=0.1, le=3600.0, description="How long a writer waits for another process's write lock."
        )
        synchronous: Literal["NORMAL", "FULL"] = Field(
            "NORMAL",
            description="SQLite fsync level: NORMAL survives process crashes (kill -9); FULL also power loss.",
        )

    params: Params

    @classmethod
    def handles(cls, location: str) -> bool:
        # A server's address without its scheme is not taken for a new folder of that name:
        # the index would land on local disk while the user believes it went to the server.
        # A folder of such a name that exists is still a folder.
        if looks_like_server_address(location) and not os.path.exists(os.path.expanduser(location)):
            return False
        return not _URI_RE.match(location)

    @classmethod
    def would_create(cls, location: str) -> bool:
        # a location that is a file makes nothing either: opening it says what is wrong
        path = Path(os.path.expanduser(location))
        return not path.is_file() and not (path / DB_FILE).is_file()

    def open(self, location: str, **options: Any) -> GraphStore:
        options.pop("settings", None)
        params = self.Params(**{**self.params.model_dump(), **options}) if options else self.params
        return EmbeddedStore(
            os.path.expanduser(location), busy_timeout_s=params.busy_timeout_s, synchronous=params.synchronous
        )


@hookimpl
def register_stores() -> list[type[StoreBackend]]:
    return [EmbeddedBackend]
