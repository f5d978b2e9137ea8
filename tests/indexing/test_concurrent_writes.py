"""New documents of a window written through ``GraphStore.write_batches`` when the store keeps
several writes in flight (``write_concurrency`` > 1, as Neo4j does): the same index as one
writer, and a failed batch never leaves the documents record trusting an unwritten document.

The embedded store serialises its writes under a lock, so with ``write_concurrency = 2`` the
batches run on the pool's threads one at a time - enough to exercise the indexer's path."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from graphroute.core import indexing
from graphroute.core.engine import open_store
from graphroute.core.indexing import DOCUMENTS_META
from graphroute.core.store import DocumentBatch, GraphStore, StoreError

from .conftest import skeleton_profile
from .test_embed_window import _corpus


def _snapshot(store: GraphStore) -> tuple[dict[str, Any], set[str], dict[str, Any]]:
    nodes = {n.id for label in ("Document", "Section", "TextChunk", "Sentence") for n in store.iter_nodes("g", label)}
    return store.counts("g"), nodes, store.get_meta("g", DOCUMENTS_META) or {}


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

        def counted(group: str, batches: list[DocumentBatch]) -> None:
            calls.append(len(batches))
            write_batches(group, batches)

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
