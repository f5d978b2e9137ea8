"""Skeleton invariants on a 200-passage slice of the real MuSiQue corpus."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from graphroute.core.api.components import IndexContext
from graphroute.core.api.store import GraphStore
from graphroute.core.apps.bench.sweep import threshold_sweep
from graphroute.core.index.pipeline import IndexReport
from graphroute.plugins.index_steps.skeleton import SentenceKnn

from .conftest import MUSIQUE, skeleton_profile
from .invariants import check_skeleton

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not MUSIQUE.is_file(), reason="MuSiQue corpus not available"),
]


def test_musique_slice_invariants(make_indexer, store: GraphStore, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    entries = json.loads(MUSIQUE.read_text(encoding="utf-8"))[:200]
    corpus = tmp_path / "musique200.json"
    corpus.write_text(json.dumps(entries), encoding="utf-8")
    indexer = make_indexer("m")
    report = indexer.index_paths([corpus])
    assert report.indexed == len([e for e in entries if e["text"].strip()]) and not report.failed
    assert report.sentences > len(entries)
    figures = check_skeleton(store, "m")
    assert figures["sentences"] == report.sentences

    # a permissive threshold creates many links: the invariants must still hold
    ctx = IndexContext(store=store, group="m", registry=indexer.registry, embedder=indexer.embedder(),
                       profile=skeleton_profile(), settings=indexer.settings, changed_docs={"x"})
    stats = SentenceKnn(SentenceKnn.Params(threshold=0.5, k=2)).run(ctx)
    assert stats["edges"] > report.sentences // 4 and stats["within_budget"]
    dense = check_skeleton(store, "m")
    assert dense["related_to"] == stats["edges"] <= 2 * report.sentences
    rows = threshold_sweep(store, "m")
    assert all(r["within_budget"] for r in rows)
    assert [r["edges"] for r in rows] == sorted((r["edges"] for r in rows), reverse=True)
    assert isinstance(IndexReport().to_json(), dict)
