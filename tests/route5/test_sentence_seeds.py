"""The passage tier from sentence search: each chunk seeds PPR with its best sentence's cosine."""

from __future__ import annotations

import numpy as np
import pytest
from graphroute.core.api.models import Label, Node
from graphroute.core.api.stage import QueryState
from graphroute.core.api.store import GraphStore
from graphroute.core.query.services import Services
from graphroute.plugins.seeds.tiers import PASSAGE_TIER, PassageSeeds

from .test_passages import GROUP, _FixedQuery, store, two_documents

__all__ = ["store"]  # the fixture, imported for the tests below


def _sentence(sid: str, chunk: str) -> Node:
    return Node(id=sid, label=Label.SENTENCE, group=GROUP, doc_id=f"d-{chunk}", props={"text": sid, "chunk_id": chunk})


def test_sentence_space_scores_each_chunk_by_its_best_sentence(store: GraphStore) -> None:
    two_documents(store)
    # c1 holds two middling sentences, c2 one close sentence among unrelated ones, c3 nothing close
    sentences = [_sentence("s1a", "c1"), _sentence("s1b", "c1"), _sentence("s2a", "c2"), _sentence("s2b", "c2"), _sentence("s3", "c3")]
    vecs = np.array([[0.6, 0.8, 0], [0.6, 0, 0.8], [0.95, 0.31225, 0], [0, 0, 1], [0.1, 0, 0.99499]], dtype=np.float32)
    store.write(GROUP, nodes=sentences, vectors={"sentence": ([s.id for s in sentences], vecs)})
    c = _FixedQuery(services=Services(store, GROUP), stage_id="t")
    c.vector = np.array([1, 0, 0], dtype=np.float32)
    st = QueryState("q", GROUP)
    PassageSeeds(PassageSeeds.Params(top_k=5, space="sentence")).run(st, c)
    seeds = st.all_seeds()
    assert [(s.node_id, s.tier, s.strategy) for s in seeds] == [
        ("c2", PASSAGE_TIER, "sentence_vector"), ("c1", PASSAGE_TIER, "sentence_vector"), ("c3", PASSAGE_TIER, "sentence_vector")
    ]
    assert [s.weight for s in seeds] == pytest.approx([0.95, 0.6, 0.1], abs=1e-4)
    assert c.stats["seeds"] == 3
