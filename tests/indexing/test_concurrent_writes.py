"""New documents of a window written through ``GraphStore.write_batches`` when the store keeps
several writes in flight (``write_concurrency`` > 1, as Neo4j does): the same index as one
writer, and a failed batch never leaves the documents record trusting an unwritten document.

The embedded store serialises its writes under a lock, so with ``write_concurrency = 2`` the
batches run on the pool's threads one at a time - enough to exercise the indexer's path."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from graphroute.core.api.constants import DOCUMENTS_META
from graphroute.core.api.store import DocumentBatch, GraphStore
from graphroute.core.engine import open_store
from graphroute.core.errors import StoreError
from graphroute.core.index import pipeline as indexing

from .conftest import skeleton_profile
from .test_embed_window import _corpus


def _snapshot(store: GraphStore) -> tuple[dict[str, Any], set[str], dict[str, Any]]:
    """What an index holds, without the time each document was indexed (two runs compared
    here may fall in different seconds)."""
    nodes = {n.id for label in ("Document", "Section", "TextChunk", "Sentence") for n in store.iter_nodes("g", label)}
    documents = {
        did: {k: v for k, v in entry.items() if k != "indexed_at"}
        for did, entry in (store.get_meta("g", DOCUMENTS_META) or {}).items()
    }
    return store.counts("g"), nodes, documents


def test_concurrent_batches_give_the_same_index_as_one_writer(
    make_indexer, registry, settings, store: GraphStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch  # type: ignore[no-untyped-def]
) -> None:
    monkeypatch.setattr(indexing, "DOC_BATCH", 4)  # three write batches in one window
    corpus = _corpus(tmp_path, 10)
    make_indexer().index_paths([corpus])

    other = open_store(str(tmp_path / "concurrent"))
    try:
        other.write_concurrency = 2
        calls: list[int] = []
        write_batches = other.write_batches

        def counted(group: str, batches: list[DocumentBatch], **kwargs: Any) -> None:
            calls.append(len(batches))
            write_batches(group, batches, **kwargs)

        monkeypatch.setattr(other, "write_batches", counted)
        report = indexing.Indexer(other, "g", registry=registry, settings=settings, profile=skeleton_profile()).index_paths([corpus])
        assert report.indexed == 10 and not report.failed
        assert calls == [3]
        counts, nodes, documents = _snapshot(other)
        assert all(d["hash"] for d in documents.values())
        assert (counts, nodes, documents) == _snapshot(store)
    finally:
        other.close()


def test_a_failed_batch_leaves_its_window_in_flight_and_the_rerun_replaces_it(
    make_indexer, store: GraphStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch  # type: ignore[no-untyped-def]
) -> None:
    monkeypatch.setattr(indexing, "DOC_BATCH", 4)
    corpus = _corpus(tmp_path, 10)
    store.write_concurrency = 2
    write = store.write
    node_writes: list[int] = []

    def failing_write(group: str, nodes: Any = (), *args: Any, **kwargs: Any) -> None:
        if nodes:
            node_writes.append(len(nodes))
            if len(node_writes) == 3:  # the third batch written fails; the two before it commit
                raise StoreError("disk full (simulated)")
        write(group, nodes, *args, **kwargs)

    monkeypatch.setattr(store, "write", failing_write)
    with pytest.raises(StoreError, match="simulated"):
        make_indexer().index_paths([corpus])
    documents = store.get_meta("g", DOCUMENTS_META) or {}
    written = {n.id for n in store.iter_nodes("g", "Document")}
    assert len(documents) == 10 and 0 < len(written) < 10
    # nothing in the record vouches for a document: the committed ones are not known to be
    # complete until the whole window is, and the failed batch's are not in the store at all
    assert all(d["hash"] is None for d in documents.values())

    monkeypatch.setattr(store, "write", write)
    report = make_indexer().index_paths([corpus])
    assert report.indexed == 10 and not report.failed
    documents = store.get_meta("g", DOCUMENTS_META) or {}
    assert all(d["hash"] for d in documents.values())
    assert set(documents) == {n.id for n in store.iter_nodes("g", "Document")}
    assert report.unchanged == 0

    clean = open_store(str(tmp_path / "clean"))
    try:
        indexing.Indexer(clean, "g", registry=make_indexer().registry, settings=make_indexer().settings,
                         profile=skeleton_profile()).index_paths([corpus])
        assert _snapshot(clean) == _snapshot(store)
    finally:
        clean.close()


def _record_node_writes(
    store: GraphStore, monkeypatch: pytest.MonkeyPatch, fail_at: int | None = None
) -> list[tuple[set[str], dict[str, Any]]]:
    """Wrap ``store.write``: each call that writes nodes is recorded as (its Document ids,
    the documents record it carries); the ``fail_at``-th such call fails instead."""
    write = store.write
    calls: list[tuple[set[str], dict[str, Any]]] = []

    def recording_write(group: str, nodes: Any = (), *args: Any, **kwargs: Any) -> None:
        if nodes:
            calls.append(({n.id for n in nodes if n.label == "Document"}, dict(kwargs["meta"][DOCUMENTS_META])))
            if len(calls) == fail_at:
                raise StoreError("disk full (simulated)")
        write(group, nodes, *args, **kwargs)

    monkeypatch.setattr(store, "write", recording_write)
    return calls


def test_a_one_writer_store_commits_a_window_and_its_documents_record_together(
    make_indexer, store: GraphStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch  # type: ignore[no-untyped-def]
) -> None:
    """The embedded store takes one write at a time: a window's batches, their documents
    record included, are one transaction. A failed window leaves nothing of itself behind,
    and the windows before it stay indexed and trusted."""
    monkeypatch.setattr(indexing, "DOC_BATCH", 2)  # five batches of two documents
    corpus = _corpus(tmp_path, 10)
    assert store.write_concurrency == 1
    calls = _record_node_writes(store, monkeypatch)
    make_indexer().index_paths([corpus])
    # one window, so one write: all five batches' documents, recorded in the same transaction
    assert len(calls) == 1 and len(calls[0][0]) == 10
    assert set(calls[0][1]) == calls[0][0] and all(e["hash"] for e in calls[0][1].values())

    # windows of about two batches; the second window's write fails
    monkeypatch.setattr(indexing, "EMBED_WINDOW_TEXTS", 20)
    other = open_store(str(tmp_path / "windows"))
    try:
        calls = _record_node_writes(other, monkeypatch, fail_at=2)
        ix = make_indexer()
        with pytest.raises(StoreError, match="simulated"):
            indexing.Indexer(other, "g", registry=ix.registry, settings=ix.settings, profile=skeleton_profile()).index_paths([corpus])
        first_window = calls[0][0]
        assert 2 < len(first_window) < 10  # more than one batch in the window, not all of them
        documents = other.get_meta("g", DOCUMENTS_META) or {}
        assert set(documents) == first_window == {n.id for n in other.iter_nodes("g", "Document")}
        assert all(d["hash"] for d in documents.values())

        monkeypatch.undo()
        report = indexing.Indexer(other, "g", registry=ix.registry, settings=ix.settings,
                                  profile=skeleton_profile()).index_paths([corpus])
        assert report.indexed == 10 - len(first_window) and report.unchanged == len(first_window)
        assert _snapshot(other) == _snapshot(store)
    finally:
        other.close()
