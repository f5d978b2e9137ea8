"""GraphStore.neighbours on every backend: the same rows as the protocol's default (edges_of
and get_nodes) and as a whole-group scan, with either filter, and nothing from another group."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from graphroute.core.api.models import Edge, EdgeType, Label, Node
from graphroute.core.api.neighbourhood import Neighbourhood, neighbourhood_of
from graphroute.core.api.store import GraphStore

TYPES = [EdgeType.MENTIONS, EdgeType.CO_OCCURS, EdgeType.IN_SECTION, EdgeType.SEMANTICALLY_SIMILAR]


def random_graph(store: GraphStore, group: str, seed: int) -> list[str]:
    """Entities, chunks, sentences and sections of a few documents, edges of several types
    in both directions (some pairs twice, one self-loop), returned: every node id."""
    rng = np.random.default_rng(seed)
    nodes = [Node(id=f"ent:e{i}", label=Label.ENTITY, group=group) for i in range(12)]
    for d in range(5):
        nodes.append(Node(id=f"d{d}/sec", label=Label.SECTION, group=group, doc_id=f"d{d}"))
        for c in range(3):
            nodes.append(Node(id=f"d{d}:chk{c}", label=Label.CHUNK, group=group, doc_id=f"d{d}"))
            nodes.append(Node(id=f"d{d}/s{c}", label=Label.SENTENCE, group=group, doc_id=f"d{d}"))
    ids = [n.id for n in nodes]
    edges = []
    for _ in range(90):
        a, b = rng.choice(len(ids), 2)
        edges.append(Edge(src=ids[a], dst=ids[b], type=TYPES[int(rng.integers(len(TYPES)))], group=group))
    edges.append(Edge(src="ent:e1", dst="ent:e1", type=EdgeType.CO_OCCURS, group=group))  # self-loop: left out
    edges.append(Edge(src="ent:e2", dst="ent:e3", type=EdgeType.CO_OCCURS, group=group))
    edges.append(Edge(src="ent:e3", dst="ent:e2", type=EdgeType.CO_OCCURS, group=group))  # the pair twice
    edges.append(Edge(src="ent:e2", dst="ent:e3", type=EdgeType.RELATION, group=group))  # not asked for
    store.write(group, nodes, edges)
    return ids


def rows(nb: Neighbourhood) -> Counter[tuple[str, str, str, str, str | None]]:
    return Counter(zip(nb.node, nb.type, nb.other, nb.other_label, nb.other_doc, strict=True))


def reference(store: GraphStore, group: str, asked: list[str], **kw: object) -> Neighbourhood:
    """The rows a whole-group scan gives (iter_edges, iter_nodes)."""
    nodes = {n.id: n for n in store.iter_nodes(group)}
    labels = {i: str(nodes[i].label) for i in asked if i in nodes}
    return neighbourhood_of(asked, labels, store.iter_edges(group, TYPES), nodes, **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize("seed", [1, 2])
def test_neighbours_match_a_scan_and_the_default(store: GraphStore, make_group: object, seed: int) -> None:
    group = make_group()  # type: ignore[operator]
    other = make_group()  # type: ignore[operator]
    ids = random_graph(store, group, seed)
    random_graph(store, other, seed + 100)  # same ids, other edges: must not leak in
    rng = np.random.default_rng(seed)
    asked = [ids[int(i)] for i in rng.choice(len(ids), 15, replace=False)] + ["ent:e2", "missing"]
    for kw in ({}, {"other_labels": [Label.ENTITY, Label.CHUNK]}, {"first_docs": 2},
               {"other_labels": [Label.CHUNK], "first_docs": 1}):
        got = store.neighbours(group, asked, TYPES, **kw)  # type: ignore[arg-type]
        want = reference(store, group, asked, other_labels=kw.get("other_labels"), first_docs=kw.get("first_docs"))
        default = GraphStore.neighbours(store, group, asked, TYPES, **kw)  # type: ignore[arg-type]
        assert rows(got) == rows(want) == rows(default), kw
        assert got.labels == want.labels == default.labels
        assert "missing" not in got.labels and "missing" not in got.node
    pair = store.neighbours(group, ["ent:e2"], [EdgeType.CO_OCCURS])
    assert Counter(o for o in pair.other)["ent:e3"] >= 2  # both directions count, as an export sums them
    assert not store.neighbours(group, ["ent:e1"], [EdgeType.CO_OCCURS]).other.count("ent:e1")


def test_neighbours_of_nothing(store: GraphStore, group: str) -> None:
    store.write(group, [Node(id="ent:a", label=Label.ENTITY, group=group)])
    assert len(store.neighbours(group, [], TYPES)) == 0
    nb = store.neighbours(group, ["ent:a"], [])
    assert nb.labels == {"ent:a": Label.ENTITY} and len(nb) == 0


def test_neighbour_counts_are_exact_or_stopped_at_the_limit(store: GraphStore, make_group: object) -> None:
    """Counts match the rows; with a limit, a node with as many rows or more may be counted
    to the limit only (then it is in ``capped`` and its counts are a lower bound), a node
    with fewer is counted whole."""
    group = make_group()  # type: ignore[operator]
    ids = random_graph(store, group, 3)
    labels = [Label.ENTITY, Label.CHUNK, Label.SECTION]
    whole = store.neighbour_counts(group, ids, TYPES, other_labels=labels)
    want = rows(reference(store, group, ids, other_labels=labels, first_docs=None))
    per_node = Counter(node for node, *_ in want.elements())
    assert {x: sum(n for *_, n in c) for x, c in whole.counts.items()} == dict(per_node) and not whole.capped
    limit = 3
    stopped = store.neighbour_counts(group, ids, TYPES, other_labels=labels, limit=limit)
    for x in ids:
        got = {(t, lb): n for t, lb, n in stopped.counts.get(x, [])}
        exact = {(t, lb): n for t, lb, n in whole.counts.get(x, [])}
        if x in stopped.capped:
            assert sum(got.values()) == limit <= per_node[x] and all(n <= exact[k] for k, n in got.items()), x
        else:
            assert got == exact, x
    if store.backend == "neo4j":  # the server stops reading a node's edges at the limit
        assert {x for x in ids if per_node[x] >= limit} == stopped.capped


def test_type_degrees_count_every_edge_of_a_type(store: GraphStore, make_group: object) -> None:
    """Where a backend keeps degrees per node and type (Neo4j), they are each node's edges of
    each type in either direction, whatever the far end; a backend without them says so."""
    group = make_group()  # type: ignore[operator]
    ids = random_graph(store, group, 4)
    got = store.type_degrees(group, [*ids, "missing"], TYPES)
    if store.backend != "neo4j":
        assert got is None
        return
    assert got is not None
    assert dict(zip(got.ids, got.labels, strict=True)) == {n.id: str(n.label) for n in store.get_nodes(group, ids)}
    per_type: Counter[tuple[str, str]] = Counter()
    for (node, t, *_), n in rows(reference(store, group, ids, other_labels=None, first_docs=None)).items():
        per_type[node, t] += n
    loops = {e.src for e in store.iter_edges(group, TYPES) if e.src == e.dst}
    assert "ent:e1" in loops
    for x in ids:
        have = got.row(x)
        if x not in loops:  # a self-loop counts as the server's degrees count a loop
            assert have == {t: n for (node, t), n in per_type.items() if node == x}, x


def test_a_read_brings_the_far_ends_type_degrees_where_the_store_keeps_them(store: GraphStore, make_group: object) -> None:
    group = make_group()  # type: ignore[operator]
    ids = random_graph(store, group, 5)
    asked = ids[:8]
    nb = store.neighbours(group, asked, TYPES, far_types=TYPES)
    assert rows(nb) == rows(store.neighbours(group, asked, TYPES))  # the rows do not change
    typed = store.type_degrees(group, sorted(set(nb.other)), TYPES)
    if typed is None:
        assert nb.far is None
        return
    assert nb.far is not None and nb.other
    assert sorted(nb.far.ids) == sorted(typed.ids) and nb.far.types == typed.types
    for x in typed.ids:
        assert nb.far.labels[nb.far.ids.index(x)] == typed.labels[typed.ids.index(x)]
        assert nb.far.row(x) == typed.row(x), x
    # a walk's read: the far ends of its labels only (sentences left out), each counted once
    walk = [str(Label.ENTITY), str(Label.CHUNK), str(Label.SECTION)]
    nb = store.neighbours(group, ids, TYPES, other_labels=walk, far_types=TYPES)
    assert rows(nb) == rows(store.neighbours(group, ids, TYPES, other_labels=walk))
    assert nb.far is not None and sorted(nb.far.ids) == sorted(set(nb.other)) and len(set(nb.other)) < len(nb.other)
    assert all(nb.far.row(x) == typed_row for x, typed_row in zip(
        nb.far.ids, (store.type_degrees(group, [x], TYPES).row(x) for x in nb.far.ids), strict=True))  # type: ignore[union-attr]
    # a node's first documents only (entity_chunks' reads): their far ends' degrees too
    firsts = store.neighbours(group, ids, TYPES, first_docs=1, far_types=TYPES)
    assert firsts.far is not None and sorted(firsts.far.ids) == sorted(set(firsts.other)) and firsts.other
    assert all(firsts.far.row(x) == nb.far.row(x) for x in firsts.far.ids if x in nb.far.ids)
