"""An on-disk embedding cache shared by every store on the machine.

Why: re-indexing a corpus where most text is unchanged (a new document added, a profile
step tweaked) must not pay for the model again. Vectors are keyed by the embedder's
``model_id`` plus a hash of the exact text that was embedded (label prefix included), so a
different model or a different prefix never returns a stale vector.

Storage is one SQLite file (``<cache_dir>/embeddings.sqlite3``) in WAL mode with a busy
timeout: SQLite's own locking makes it safe for several indexing processes at once, and a
write is a transaction, so a crash never leaves a half-written vector.
"""

from __future__ import annotations

import hashlib
import sqlite3
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from graphroute.core.api.components import Embedder

CACHE_FILE = "embeddings.sqlite3"


def enable_wal(con: sqlite3.Connection, wait_s: float = 60.0) -> None:
    """Switch to WAL. Two processes doing this on a new file at the same moment can get
    "database is locked" at once (the switch takes an exclusive lock and SQLite does not
    always call the busy handler for it), so retry until the other one is done."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            con.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def text_key(text: str, input_type: str = "document") -> str:
    return hashlib.sha256(f"{input_type}\x00{text}".encode()).hexdigest()


class EmbeddingCache:
    """``(model_id, text hash) -> float32 vector`` in one SQLite file."""

    def __init__(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.path = directory / CACHE_FILE
        self._local = threading.local()
        with self._conn() as con:
            con.execute(
                "CREATE TABLE IF NOT EXISTS vectors (model TEXT NOT NULL, key TEXT NOT NULL, "
                "dim INTEGER NOT NULL, vec BLOB NOT NULL, PRIMARY KEY (model, key)) WITHOUT ROWID"
            )

    def _conn(self) -> sqlite3.Connection:
        con: sqlite3.Connection | None = getattr(self._local, "con", None)
        if con is None:
            con = sqlite3.connect(self.path, timeout=60.0)
            enable_wal(con)
            con.execute("PRAGMA synchronous=NORMAL")
            self._local.con = con
        return con

    def get_many(self, model: str, keys: Sequence[str]) -> dict[str, np.ndarray]:
        out: dict[str, np.ndarray] = {}
        con = self._conn()
        uniq = list(dict.fromkeys(keys))
        for i in range(0, len(uniq), 500):
            part = uniq[i : i + 500]
            marks = ",".join("?" * len(part))
            rows = con.execute(
                f"SELECT key, dim, vec FROM vectors WHERE model = ? AND key IN ({marks})", [model, *part]
            ).fetchall()
            for key, dim, blob in rows:
                vec = np.frombuffer(blob, dtype=np.float32)
                if vec.shape[0] == dim:
                    out[key] = vec
        return out

    def put_many(self, model: str, items: Sequence[tuple[str, np.ndarray]]) -> None:
        if not items:
            return
        con = self._conn()
        with con:
            con.executemany(
                "INSERT OR REPLACE INTO vectors (model, key, dim, vec) VALUES (?, ?, ?, ?)",
                [(model, k, int(v.shape[0]), np.asarray(v, dtype=np.float32).tobytes()) for k, v in items],
            )

    def count(self, model: str | None = None) -> int:
        con = self._conn()
        if model is None:
            return int(con.execute("SELECT COUNT(*) FROM vectors").fetchone()[0])
        return int(con.execute("SELECT COUNT(*) FROM vectors WHERE model = ?", [model]).fetchone()[0])

    def close(self) -> None:
        con = getattr(self._local, "con", None)
        if con is not None:
            con.close()
            self._local.con = None


def _is_contextual(embedder: Embedder) -> bool:
    """True when the embedder overrides ``embed_contextual`` (e.g. voyage-context-3)."""
    return type(embedder).embed_contextual is not Embedder.embed_contextual


def is_contextual(embedder: Embedder) -> bool:
    """True when ``embedder`` (or the model behind a :class:`CachingEmbedder`) embeds a
    document's units in context, so its units must not be pooled with other documents'."""
    return _is_contextual(getattr(embedder, "inner", embedder))


def reads_spans(embedder: Embedder) -> bool:
    """True when ``embedder`` (or the model behind a :class:`CachingEmbedder`) implements
    ``embed_spans``: sentence vectors can then be read from their chunk's pass."""
    inner = getattr(embedder, "inner", embedder)
    return type(inner).embed_spans is not Embedder.embed_spans


class CachingEmbedder(Embedder):
    """Wraps an embedder with an :class:`EmbeddingCache`; only missing texts reach the model.

    Contextual embedders produce a unit's vector from its whole document, so for them the
    cache key covers the document's full unit list plus the unit's position.
    """

    name = "cached"

    def __init__(self, inner: Embedder, cache: EmbeddingCache | None) -> None:
        super().__init__(inner.params)
        self.inner = inner
        self.cache = cache
        self.hits = 0
        self.misses = 0

    @property
    def model_id(self) -> str:
        return self.inner.model_id

    @property
    def document_id(self) -> str:
        return self.inner.document_id

    @property
    def dimension(self) -> int:
        return self.inner.dimension

    def embed(self, texts: Sequence[str], *, input_type: str = "document") -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        if self.cache is None:
            self.misses += len(texts)
            return self.inner.embed(texts, input_type=input_type)
        keys = [text_key(t, input_type) for t in texts]
        found = self.cache.get_many(self.document_id, keys)
        missing = list(dict.fromkeys(t for t, k in zip(texts, keys, strict=True) if k not in found))
        if missing:
            vecs = self.inner.embed(missing, input_type=input_type)
            new = [(text_key(t, input_type), np.asarray(v, dtype=np.float32)) for t, v in zip(missing, vecs, strict=True)]
            self.cache.put_many(self.document_id, new)
            found.update(new)
        self.misses += len(missing)
        self.hits += len(texts) - len(missing)
        return np.stack([found[k] for k in keys]).astype(np.float32, copy=False)

    def embed_contextual(self, documents: Sequence[Sequence[str]]) -> list[np.ndarray]:
        if not _is_contextual(self.inner) or self.cache is None:
            return super().embed_contextual(documents)
        out: list[np.ndarray | None] = []
        todo: list[int] = []
        doc_keys: list[list[str]] = []
        for i, units in enumerate(documents):
            base = text_key("\x1e".join(units), "contextual")
            keys = [f"{base}:{j}" for j in range(len(units))]
            doc_keys.append(keys)
            found = self.cache.get_many(self.document_id, keys)
            if len(found) == len(keys):
                out.append(np.stack([found[k] for k in keys]) if keys else np.zeros((0, self.dimension), np.float32))
                self.hits += len(keys)
            else:
                out.append(None)
                todo.append(i)
        if todo:
            fresh = self.inner.embed_contextual([documents[i] for i in todo])
            for i, vecs in zip(todo, fresh, strict=True):
                self.cache.put_many(self.document_id, list(zip(doc_keys[i], vecs, strict=True)))
                out[i] = np.asarray(vecs, dtype=np.float32)
                self.misses += len(doc_keys[i])
        return [o for o in out if o is not None]

    def embed_spans(
        self, texts: Sequence[str], heads: Sequence[int], spans: Sequence[Sequence[tuple[int, int]]],
    ) -> tuple[np.ndarray, list[np.ndarray]]:
        """The text's vector is keyed like :meth:`embed`'s (it is the same vector); a span's by
        the text, its heading and the span, since it is read in the text's context."""
        if self.cache is None:
            self.misses += len(texts) + sum(len(s) for s in spans)
            return self.inner.embed_spans(texts, heads, spans)
        text_keys = [text_key(t) for t in texts]
        span_keys = [[f"{text_key(t, 'span')}:{h}:{a}:{b}" for a, b in s] for t, h, s in zip(texts, heads, spans, strict=True)]
        found = self.cache.get_many(self.document_id, text_keys + [k for ks in span_keys for k in ks])
        todo = [i for i, k in enumerate(text_keys) if k not in found or any(sk not in found for sk in span_keys[i])]
        if todo:
            vecs, span_vecs = self.inner.embed_spans([texts[i] for i in todo], [heads[i] for i in todo], [spans[i] for i in todo])
            new = [(text_keys[i], vecs[n]) for n, i in enumerate(todo)]
            new += [(k, v) for n, i in enumerate(todo) for k, v in zip(span_keys[i], span_vecs[n], strict=True)]
            self.cache.put_many(self.document_id, new)
            found.update(new)
        missed = len(todo) + sum(len(span_keys[i]) for i in todo)
        self.misses += missed
        self.hits += len(texts) + sum(len(ks) for ks in span_keys) - missed
        dim = self.dimension
        return (
            np.stack([found[k] for k in text_keys]).astype(np.float32, copy=False),
            [np.stack([found[k] for k in ks]).astype(np.float32, copy=False) if ks else np.zeros((0, dim), np.float32) for ks in span_keys],
        )

    def embed_query(self, text: str) -> np.ndarray:
        return self.inner.embed_query(text)
