"""What must be identical across backends, checked on both at once."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import numpy as np
import pytest
from graphroute.core.api.models import EdgeType, Label, Node, VectorSpace
from graphroute.core.api.store import GraphStore, clear_derived
from graphroute.core.lib.graph import adjacency

from .conftest import open_backend
from .test_store_conformance import graph_fixture, unit


@pytest.fixture(scope="module")
def both(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[GraphStore, GraphStore]]:
    emb = open_backend("embedded", tmp_path_factory)
    neo = open_backend("neo4j", tmp_path_factory)
    yield emb, neo
    emb.close()
    neo.close()


def test_adjacency_identical_on_both_backends(both: tuple[GraphStore, GraphStore]) -> None:
    group = f"conf-x-{uuid.uuid4().hex[:8]}"
    views = []
    try:
        for store in both:
            graph_fixture(store, group)
        clear_derived()
        for store in both:
            views.append(
                adjacency(store, group, {EdgeType.NEXT: 1.0, EdgeType.PART_OF: 0.5, EdgeType.RELATED_TO: 1.0},
                          weight_prop="similarity")
            )
    finally:
        for store in both:
            store.delete_group(group)
    a, b = views
    assert a.ids == b.ids and len(a.ids) > 0
    assert (a.matrix != b.matrix).nnz == 0
    np.testing.assert_array_equal(a.matrix.toarray(), b.matrix.toarray())


def test_search_and_reads_identical_on_both_backends(both: tuple[GraphStore, GraphStore]) -> None:
    group = f"conf-x-{uuid.uuid4().hex[:8]}"
    rng = np.random.default_rng(21)
    ids = [f"c{i:02d}" for i in range(40)]
    mat = unit(rng, 40)
    nodes = [Node(id=i, label=Label.CHUNK, group=group, props={"n": j}) for j, i in enumerate(ids)]
    q = unit(rng, 1)[0]
    results = []
    try:
        for store in both:
            store.write(group, nodes, vectors={VectorSpace.CHUNK: (ids, mat)})
            results.append((
                store.vector_search(group, VectorSpace.CHUNK, q, 7),
                [n.model_dump() for n in store.iter_nodes(group, Label.CHUNK)],
                store.counts(group),
            ))
    finally:
        for store in both:
            store.delete_group(group)
    (hits_a, nodes_a, counts_a), (hits_b, nodes_b, counts_b) = results
    assert [h[0] for h in hits_a] == [h[0] for h in hits_b]
    np.testing.assert_allclose([h[1] for h in hits_a], [h[1] for h in hits_b], atol=1e-5)
    assert nodes_a == nodes_b and counts_a == counts_b
