"""``graphroute perf graph-gen`` into the real Neo4j: the store's bulk path (new documents
created with every edge they touch, windows written while the next is built) writes exactly
the graph the embedded store gets from the same spec."""

from __future__ import annotations

import uuid
from pathlib import Path

import numpy as np
from graphroute.core.api.models import EdgeType, Label, VectorSpace
from graphroute.core.apps.perf.graphgen import GraphSpec, write_graph
from graphroute.plugins.stores.embedded import EmbeddedStore
from graphroute.plugins.stores.neo4j_store import Neo4jStore

from tests.stores.test_neo4j_errors import NEO4J_URI, PASSWORD, needs_server

SPEC = GraphSpec(sentences=400, topics=3, entities=120, hubs=4, seed=5)


def _edges(store: object, group: str) -> list[tuple[str, str, str, str | None, str]]:
    return sorted((e.src, str(e.type), e.dst, e.doc_id, repr(sorted(e.props.items())))
                  for e in store.iter_edges(group))  # type: ignore[attr-defined]


@needs_server
def test_graph_gen_into_neo4j_writes_what_the_embedded_store_gets(tmp_path: Path) -> None:
    group = f"t-gen-{uuid.uuid4().hex[:8]}"
    neo = Neo4jStore(NEO4J_URI, "neo4j", PASSWORD)
    emb = EmbeddedStore(tmp_path / "store")
    try:
        result = write_graph(neo, group, SPEC)
        write_graph(emb, group, SPEC)
        counts = neo.counts(group)
        written = result["written"]
        assert counts == emb.counts(group)
        assert counts["nodes"][Label.SENTENCE] == written["sentences"] == SPEC.sentences
        assert counts["edges"][EdgeType.MENTIONS] == written["mentions"] > SPEC.sentences
        assert counts["edges"][EdgeType.CO_OCCURS] == written["co_occurs"] > 0
        assert counts["vectors"][VectorSpace.SENTENCE] == SPEC.sentences
        # every edge once, with the same ownership and values as the embedded store's
        assert _edges(neo, group) == _edges(emb, group)
        # the same vector on every node, and the index finds a sentence by its own vector
        for space in (VectorSpace.SENTENCE, VectorSpace.CHUNK, VectorSpace.ENTITY):
            ids, m = emb.all_vectors(group, space)
            assert np.allclose(neo.get_vectors(group, space, ids), m, atol=1e-6)
        ids, m = emb.all_vectors(group, VectorSpace.SENTENCE)
        assert neo.vector_search(group, VectorSpace.SENTENCE, m[7], 1)[0][0] == ids[7]
    finally:
        neo.delete_group(group)
        neo.close()
        emb.close()
