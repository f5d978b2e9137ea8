"""The indexer embeds a window of document batches in one model call (sentences and chunks
together, so the model can sort them by length) and splits the vectors back correctly."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from graphroute.core.api.models import VectorSpace
from graphroute.core.api.store import GraphStore
from graphroute.core.engine import open_store
from graphroute.core.index import pipeline as indexing

from .conftest import skeleton_profile


def _corpus(tmp_path: Path, n: int) -> Path:
    """n small passages of different lengths as a corpus.json (one document each)."""
    rows = [
        {"title": f"Town {i}", "text": f"Town {i} lies on river number {i}. " + " ".join(
            f"In year {1900 + i + j} its mayor was person {i * 10 + j} of the guild {j}." for j in range(1 + i % 4)
        )}
        for i in range(n)
    ]
    path = tmp_path / "corpus.json"
    path.write_text(json.dumps(rows), encoding="utf-8")
    return path


def _vectors(store: GraphStore, space: str) -> dict[str, np.ndarray]:
    ids, mat = store.all_vectors("g", space)
    return dict(zip(ids, mat, strict=True))


def test_one_call_per_window_and_the_same_vectors_as_per_batch_calls(
    make_indexer, registry, settings, store: GraphStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch  # type: ignore[no-untyped-def]
) -> None:
    monkeypatch.setattr(indexing, "DOC_BATCH", 4)  # several write batches inside one window
    corpus = _corpus(tmp_path, 10)
    ix = make_indexer(profile=skeleton_profile())
    report = ix.index_paths([corpus])
    assert report.indexed == 10 and not report.failed
    inner = ix.embedder().inner
    counts = store.counts("g")
    # 10 documents in batches of 4 fit one window (far below EMBED_WINDOW_TEXTS): one call
    assert inner.calls == 1
    assert inner.texts_embedded == counts["vectors"]["sentence"] + counts["vectors"]["chunk"]
    assert counts["nodes"]["Document"] == 10 and counts["vectors"]["sentence"] == counts["nodes"]["Sentence"]

    # the same corpus with a window of one batch, into another store, with a cold cache
    monkeypatch.setattr(indexing, "EMBED_WINDOW_TEXTS", 1)
    settings.cache_dir = tmp_path / "cache-per-batch"
    other = open_store(str(tmp_path / "store-per-batch"))
    try:
        ix2 = indexing.Indexer(other, "g", registry=registry, settings=settings, profile=skeleton_profile())
        ix2.index_paths([corpus])
        assert ix2.embedder().inner.calls == 3  # batches of 4, 4 and 2 documents
        for space in (VectorSpace.SENTENCE.value, VectorSpace.CHUNK.value, VectorSpace.SECTION.value):
            wide, narrow = _vectors(store, space), _vectors(other, space)
            assert wide.keys() == narrow.keys() and wide
            for k, v in wide.items():  # a shifted split would pair a vector with another text
                assert float(v @ narrow[k]) > 0.9999, (space, k)
    finally:
        other.close()
