"""The pure graph algorithms of the entity layer, on small inputs with known answers."""

from __future__ import annotations

import numpy as np
import pytest
from graphroute.core.api.components import Extraction
from graphroute.core.api.models import EdgeType
from graphroute.plugins.graph_builders import entity_graph
from graphroute.plugins.graph_builders.entity_graph import (
    ChunkInput,
    build_entity_layer,
    detect_communities,
    extractive_summary,
    knn_pairs,
    select_hubs,
    shares_pairs,
    size_distribution,
)


def _two_cliques() -> tuple[list[str], list[tuple[str, str, float]]]:
    a = [f"a{i}" for i in range(5)]
    b = [f"b{i}" for i in range(5)]
    edges = [(x, y, 1.0) for grp in (a, b) for i, x in enumerate(grp) for y in grp[i + 1 :]]
    edges.append(("a0", "b0", 1.0))  # the one bridge
    return a + b, edges


def test_two_cliques_joined_by_one_edge_are_two_communities() -> None:
    nodes, edges = _two_cliques()
    for algorithm in ("leiden", "louvain"):
        m = detect_communities(nodes, edges, algorithm=algorithm)  # type: ignore[arg-type]
        assert len(set(m.values())) == 2, algorithm
        assert len({m[f"a{i}"] for i in range(5)}) == 1
        assert len({m[f"b{i}"] for i in range(5)}) == 1
        assert m["a0"] != m["b0"]


def test_communities_are_deterministic_and_isolated_nodes_are_singletons() -> None:
    nodes, edges = _two_cliques()
    nodes = [*nodes, "lonely"]
    first = detect_communities(nodes, edges, seed=7)
    assert all(
        detect_communities(nodes, list(reversed(edges)), seed=7)[n] == first[n] for n in nodes
    )
    assert sorted(first.values()).count(first["lonely"]) == 1
    assert first["lonely"] == 2  # numbered by size: the two cliques come first


def test_higher_resolution_splits_more() -> None:
    nodes, edges = _two_cliques()
    coarse = detect_communities(nodes, edges, resolution=1.0)
    fine = detect_communities(nodes, edges, resolution=3.0)
    assert len(set(coarse.values())) < len(set(fine.values()))


def test_knn_pairs_threshold_k_and_no_self_edges() -> None:
    ids = ["a", "b", "c", "d"]
    m = np.array([[1, 0, 0], [0.9, 0.1, 0], [0.8, 0.2, 0], [0, 0, 1]], dtype=np.float32)
    pairs = knn_pairs(ids, m, threshold=0.6, k=1, block=2)  # block < n: exercise blocking
    got = {(a, b) for a, b, _ in pairs}
    assert ("a", "d") not in got and ("c", "d") not in got  # orthogonal: below threshold
    assert all(a < b for a, b in got)
    assert ("a", "b") in got and ("b", "c") in got
    for _, _, s in pairs:
        assert 0.6 <= s <= 1.0
    # more neighbours allowed -> a superset of edges
    assert got <= {(a, b) for a, b, _ in knn_pairs(ids, m, threshold=0.6, k=3)}


def test_knn_pairs_bounds_a_blocks_cells_without_changing_the_edges(monkeypatch: pytest.MonkeyPatch) -> None:
    """Many entities mean fewer rows per block (the cell bound), never other neighbours: the
    edges with a bound of 3 rows' worth of cells equal the edges from one block of every
    row, and every row still gets its neighbours (a block skipped would lose edges)."""
    rng = np.random.default_rng(3)
    centres = rng.normal(size=(6, 16))
    m = np.concatenate([c + 0.3 * rng.normal(size=(10, 16)) for c in centres]).astype(np.float32)
    ids = [f"e{i:02d}" for i in range(len(m))]
    whole = knn_pairs(ids, m, threshold=0.5, k=3, block=len(ids))
    monkeypatch.setattr(entity_graph, "_KNN_BLOCK_CELLS", 3 * len(ids))
    bounded = knn_pairs(ids, m, threshold=0.5, k=3, block=len(ids))
    assert [(a, b) for a, b, _ in bounded] == [(a, b) for a, b, _ in whole]
    assert np.allclose([s for *_, s in bounded], [s for *_, s in whole], atol=2e-6)
    assert {x for a, b, _ in bounded for x in (a, b)} == set(ids)


def test_hubs_and_shares_only_cross_documents() -> None:
    counts = {
        "s1": {"ent:x": 3, "ent:y": 1, "ent:z": 1},
        "s2": {"ent:x": 2, "ent:w": 5},
        "s3": {"ent:x": 1, "ent:w": 1},
    }
    hubs = select_hubs(counts, 2, {"ent:y": 10, "ent:z": 1})
    assert hubs["s1"] == ["ent:x", "ent:y"]  # tie y/z broken by global count
    assert hubs["s2"] == ["ent:w", "ent:x"]
    pairs, skipped = shares_pairs(hubs, {"s1": "d1", "s2": "d2", "s3": "d2"}, max_sections=10)
    assert skipped == 0
    assert {(a, b) for a, b, _ in pairs} == {("s1", "s2"), ("s1", "s3")}  # s2/s3 same document
    assert dict(((a, b), e) for a, b, e in pairs)[("s1", "s2")] == ["ent:x"]
    _, skipped = shares_pairs(hubs, {"s1": "d1", "s2": "d2", "s3": "d3"}, max_sections=2)
    assert skipped == 1  # ent:x is a hub of three sections


def test_build_entity_layer_mentions_relations_and_cooccurrence() -> None:
    chunks = [
        ChunkInput(
            "c1",
            "d1",
            "Marie Curie worked in Paris. She won the Nobel Prize.",
            "Curie",
            [("s1", "Marie Curie worked in Paris."), ("s2", "She won the Nobel Prize.")],
        ),
        ChunkInput(
            "c2",
            "d2",
            "Paris is the capital of France.",
            "Paris",
            [("s3", "Paris is the capital of France.")],
        ),
    ]
    ex = {
        "c1": Extraction(
            entities=["Marie Curie", "Paris", "the Nobel Prize"],
            triples=[("Marie Curie", "won", "Nobel Prize"), ("Marie Curie", "worked in", "Paris")],
        ),
        "c2": Extraction(entities=["Paris", "France", "PARIS"]),
    }
    layer = build_entity_layer("g", chunks, ex)
    ents = {n.id: n for n in layer.entities}
    assert set(ents) == {"ent:marie curie", "ent:paris", "ent:nobel prize", "ent:france"}
    assert ents["ent:paris"].props["doc_count"] == 2
    assert ents["ent:paris"].props["aliases"] == ["PARIS", "Paris"]
    assert ents["ent:paris"].props["name"] == "Paris"
    assert all(n.doc_id is None and n.group == "g" for n in layer.entities)
    by_type: dict[str, list] = {}
    for e in layer.edges:
        by_type.setdefault(e.type, []).append(e)
    sent = {(e.src, e.dst) for e in by_type[EdgeType.MENTIONS] if e.props["level"] == "sentence"}
    assert (
        ("s2", "ent:nobel prize") in sent
        and ("s1", "ent:paris") in sent
        and ("s3", "ent:france") in sent
    )
    assert ("s2", "ent:paris") not in sent
    rel = {(e.src, e.dst): e for e in by_type[EdgeType.RELATION]}
    assert rel[("ent:marie curie", "ent:nobel prize")].props["relation"] == "won"
    assert rel[("ent:marie curie", "ent:nobel prize")].doc_id == "d1"
    # c1 has triples -> no co-occurrence there; c2 has none -> paris/france co-occur
    co = {(e.src, e.dst) for e in by_type[EdgeType.CO_OCCURS]}
    assert co == {("ent:france", "ent:paris")}
    assert all(e.doc_id in ("d1", "d2") for e in by_type[EdgeType.MENTIONS])
    assert layer.stats["triples"] == 2


def test_cooccurrence_pairs_are_bounded_per_chunk() -> None:
    names = [f"Entity Number {i}" for i in range(40)]
    layer = build_entity_layer(
        "g", [ChunkInput("c", "d", "x")], {"c": Extraction(entities=names)}, max_co_occurring=10
    )
    assert layer.stats["co_occurs_edges"] == 10 * 9 // 2


def test_size_distribution_and_extractive_summary() -> None:
    d = size_distribution([2, 3, 3, 10, 120])
    assert (d["min"], d["median"], d["max"]) == (2, 3, 120)
    assert d["histogram"] == {"2": 1, "3-5": 2, "6-10": 1, "101-500": 1}
    title, summary, used = extractive_summary(
        ["Paris", "France", "Seine"],
        [("s1", "Paris is in France.", 2.0), ("s2", "The Seine flows.", 1.0)],
    )
    assert title == "Paris, France, Seine"
    assert used == "s1" and summary.endswith("Paris is in France.")
