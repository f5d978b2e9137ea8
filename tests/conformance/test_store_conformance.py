"""One conformance suite, run on every store backend (see conftest.py).

Every test uses its own group, so the backends' shared state never leaks between tests;
group isolation itself is tested explicitly.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest
from graphroute.core.api.models import Edge, EdgeType, Label, Node, VectorSpace
from graphroute.core.api.store import DocumentBatch, GraphStore, MetaPatch, clear_derived
from graphroute.core.errors import GroupBusyError, StoreError
from graphroute.core.lib.graph import adjacency

DIM = 16
MakeGroup = Callable[..., str]


def unit(rng: np.random.Generator, n: int, dim: int = DIM) -> np.ndarray:
    m = rng.normal(size=(n, dim)).astype(np.float32)
    return m / np.linalg.norm(m, axis=1, keepdims=True)


def doc(group: str, doc_id: str, n_sent: int = 3, title: str | None = None) -> tuple[list[Node], list[Edge]]:
    """A small document: Document -> Section <- Sentences chained by NEXT."""
    nodes = [
        Node(id=f"{doc_id}", label=Label.DOCUMENT, group=group, doc_id=doc_id,
             props={"title": title or f"Title {doc_id}"}),
        Node(id=f"{doc_id}/s", label=Label.SECTION, group=group, doc_id=doc_id,
             props={"path": f"{doc_id} > Intro", "level": 1}),
    ]
    edges = [Edge(src=f"{doc_id}", dst=f"{doc_id}/s", type=EdgeType.HAS_SECTION, group=group, doc_id=doc_id)]
    for i in range(n_sent):
        sid = f"{doc_id}/s/{i}"
        nodes.append(Node(id=sid, label=Label.SENTENCE, group=group, doc_id=doc_id,
                          props={"text": f"sentence {i} of {doc_id}", "index": i}))
        edges.append(Edge(src=sid, dst=f"{doc_id}/s", type=EdgeType.PART_OF, group=group, doc_id=doc_id))
        if i:
            edges.append(Edge(src=f"{doc_id}/s/{i - 1}", dst=sid, type=EdgeType.NEXT, group=group, doc_id=doc_id))
    return nodes, edges


def sentence_ids(doc_id: str, n: int = 3) -> list[str]:
    return [f"{doc_id}/s/{i}" for i in range(n)]


def edge_keys(edges: list[Edge]) -> set[tuple[str, str, str]]:
    return {(e.src, str(e.type), e.dst) for e in edges}


# --------------------------------------------------------------------------- nodes


def test_find_nodes_compares_values_by_python_equality(store: GraphStore, group: str) -> None:
    """Both backends let Python's equality decide (core.store.nodes_equal_to): 1 == 1.0 ==
    True, lists and maps by value, and a list never matches the text of its own JSON."""
    store.write(group, [
        Node(id="a", label=Label.ENTITY, group=group, props={"tags": ["x", "y"], "n": 1}),
        Node(id="b", label=Label.ENTITY, group=group, props={"tags": '["x", "y"]', "n": 2.0}),
        Node(id="c", label=Label.ENTITY, group=group, props={"tags": {"k": 1}, "n": True}),
        Node(id="d", label=Label.ENTITY, group=group, props={"n": "1"}),
        Node(id="s", label=Label.SENTENCE, group=group, props={"n": 1}),
    ])
    assert [n.id for n in store.find_nodes(group, Label.ENTITY, "tags", [["x", "y"]])] == ["a"]
    assert [n.id for n in store.find_nodes(group, Label.ENTITY, "tags", ['["x", "y"]'])] == ["b"]
    assert [n.id for n in store.find_nodes(group, Label.ENTITY, "tags", [{"k": 1}])] == ["c"]
    assert [n.id for n in store.find_nodes(group, Label.ENTITY, "n", [1.0])] == ["a", "c"]
    assert [n.id for n in store.find_nodes(group, Label.ENTITY, "n", ["1", 2, 1.0])] == ["a", "b", "c", "d"]


def test_upsert_get_iter_find_nodes(store: GraphStore, group: str) -> None:
    nodes, edges = doc(group, "d1")
    store.write(group, nodes, edges)
    got = store.get_nodes(group, ["d1/s/2", "missing", "d1"])
    assert [n.id for n in got] == ["d1/s/2", "d1"]
    assert got[0].label == Label.SENTENCE and got[0].doc_id == "d1" and got[0].group == group
    assert got[0].props == {"text": "sentence 2 of d1", "index": 2}
    assert got[1].props["title"] == "Title d1"

    assert {n.id for n in store.iter_nodes(group)} == {n.id for n in nodes}
    assert {n.id for n in store.iter_nodes(group, Label.SENTENCE)} == set(sentence_ids("d1"))
    assert {n.id for n in store.iter_nodes(group, doc_id="d1")} == {n.id for n in nodes}
    assert list(store.iter_nodes(group, doc_id="nope")) == []

    # upsert by id replaces the properties (and may change label / owner)
    store.write(group, [Node(id="d1/s/1", label=Label.SENTENCE, group=group, doc_id="d1",
                             props={"text": "changed", "nested": {"a": [1, 2]}})])
    (n1,) = store.get_nodes(group, ["d1/s/1"])
    assert n1.props == {"text": "changed", "nested": {"a": [1, 2]}}
    assert sum(1 for _ in store.iter_nodes(group)) == len(nodes)

    ents = [
        Node(id=f"e{i}", label=Label.ENTITY, group=group, props={"name": name, "norm": name.lower(), "score": i})
        for i, name in enumerate(["Paris", "London", "Rome", "paris"])
    ]
    store.write(group, ents)
    assert {n.id for n in store.find_nodes(group, Label.ENTITY, "name", ["Paris", "Rome", "Oslo"])} == {"e0", "e2"}
    assert {n.id for n in store.find_nodes(group, Label.ENTITY, "norm", ["paris"])} == {"e0", "e3"}
    assert {n.id for n in store.find_nodes(group, Label.ENTITY, "score", [1, 3])} == {"e1", "e3"}
    assert store.find_nodes(group, Label.SENTENCE, "name", ["Paris"]) == []
    assert store.find_nodes(group, Label.ENTITY, "name", []) == []
    assert {n.id for n in store.find_nodes(group, Label.DOCUMENT, "title", ["Title d1"])} == {"d1"}


def test_properties_come_back_as_written(store: GraphStore, group: str) -> None:
    # 2**70: past 64 bits, where some JSON readers turn integers into floats
    props = {"text": "Zoë → 東京", "f": 0.1, "tiny": 1e-300, "big": 2**70, "neg": -(2**63), "flag": True,
             "none": None, "nested": {"a": [1, 2.5, "x"]}}
    store.write(group, [Node(id="p1", label=Label.SENTENCE, group=group, doc_id="d", props=props)])
    (got,) = store.get_nodes(group, ["p1"])
    assert got.props == props
    assert type(got.props["big"]) is int and type(got.props["f"]) is float


def test_node_of_other_group_is_rejected(store: GraphStore, group: str) -> None:
    with pytest.raises(StoreError):
        store.write(group, [Node(id="x", label=Label.ENTITY, group=group + "-other")])
    assert store.get_nodes(group, ["x"]) == []


# --------------------------------------------------------------------------- edges


def test_a_scan_sees_the_group_as_it_was_when_it_began(store: GraphStore, group: str) -> None:
    """iter_nodes / iter_edges may hand rows over a batch at a time (the embedded store does,
    so a large group's scan never holds every row at once); a write that commits from
    another thread while a scan is under way must not show in it. 2,500 sentences make
    more rows than one batch, so the rows after the write come from later batches. One scan
    at a time: an open scan could hold the snapshot for the other."""
    n1, e1 = doc(group, "d1", n_sent=2_500)
    n2, e2 = doc(group, "d2", n_sent=10)

    def rewrite() -> None:
        store.delete_document(group, "d1")
        store.write(group, n2, e2)

    def scan_during_rewrite(scan: Iterator[Any]) -> list[Any]:
        first = next(scan)  # the scan has begun
        writer = threading.Thread(target=rewrite)
        writer.start()
        writer.join()
        assert {n.id for n in store.get_nodes(group, ["d1", "d2"])} == {"d2"}  # the write committed
        return [first, *scan]

    store.write(group, n1, e1)
    assert edge_keys(scan_during_rewrite(store.iter_edges(group))) == edge_keys(e1)
    store.delete_document(group, "d2")
    store.write(group, n1, e1)
    assert {n.id for n in scan_during_rewrite(store.iter_nodes(group))} == {n.id for n in n1}


def test_a_scan_left_half_read_blocks_no_write_of_its_thread(store: GraphStore, group: str) -> None:
    """A caller may stop reading a scan (an exception, a ``break`` while a traceback keeps the
    generator alive); the thread that began it still reads the newest commits and writes."""
    n1, e1 = doc(group, "d1", n_sent=2_500)
    store.write(group, n1, e1)
    scan = store.iter_edges(group)
    next(scan)
    writer = threading.Thread(target=lambda: store.write(group, *doc(group, "d2")))
    writer.start()
    writer.join()
    store.write(group, *doc(group, "d3"))
    assert {n.id for n in store.get_nodes(group, ["d1", "d2", "d3"])} == {"d1", "d2", "d3"}
    assert next(scan).type in {EdgeType.HAS_SECTION, EdgeType.PART_OF, EdgeType.NEXT}  # still d1's scan


def test_edges_of_directions_and_types(store: GraphStore, group: str) -> None:
    nodes, edges = doc(group, "d1")
    store.write(group, nodes, edges)
    out = store.edges_of(group, ["d1/s/1"])
    assert edge_keys(out) == {("d1/s/1", "PART_OF", "d1/s"), ("d1/s/1", "NEXT", "d1/s/2")}
    inn = store.edges_of(group, ["d1/s/1"], direction="in")
    assert edge_keys(inn) == {("d1/s/0", "NEXT", "d1/s/1")}
    both = store.edges_of(group, ["d1/s/1"], direction="both")
    assert edge_keys(both) == edge_keys(out) | edge_keys(inn)
    assert edge_keys(store.edges_of(group, ["d1/s/1"], types=[EdgeType.NEXT], direction="both")) == {
        ("d1/s/0", "NEXT", "d1/s/1"), ("d1/s/1", "NEXT", "d1/s/2")}
    # an edge between two asked ids is returned once
    both2 = store.edges_of(group, ["d1/s/0", "d1/s/1"], types=[EdgeType.NEXT], direction="both")
    assert len(both2) == 2 and edge_keys(both2) == {("d1/s/0", "NEXT", "d1/s/1"), ("d1/s/1", "NEXT", "d1/s/2")}
    assert store.edges_of(group, ["d1/s/1"], types=[EdgeType.MENTIONS]) == []
    assert store.edges_of(group, []) == []
    (e,) = store.edges_of(group, ["d1"], types=[EdgeType.HAS_SECTION])
    assert e.group == group and e.doc_id == "d1"


def test_iter_edges_by_types_props_and_upsert(store: GraphStore, group: str) -> None:
    nodes, edges = doc(group, "d1", n_sent=4)
    store.write(group, nodes, edges)
    assert edge_keys(list(store.iter_edges(group))) == edge_keys(edges)
    nexts = list(store.iter_edges(group, [EdgeType.NEXT]))
    assert len(nexts) == 3 and all(e.type == EdgeType.NEXT for e in nexts)
    assert len(list(store.iter_edges(group, [EdgeType.NEXT, EdgeType.HAS_SECTION]))) == 4
    assert list(store.iter_edges(group, [])) == []

    # same (src, type, dst) again updates the edge instead of adding a second one
    sim = Edge(src="d1/s/0", dst="d1/s/3", type=EdgeType.RELATED_TO, group=group, props={"similarity": 0.91})
    store.write(group, edges=[sim])
    store.write(group, edges=[sim.model_copy(update={"props": {"similarity": 0.95}})])
    rel = list(store.iter_edges(group, [EdgeType.RELATED_TO]))
    assert len(rel) == 1 and rel[0].props == {"similarity": 0.95} and rel[0].doc_id is None

    # edges whose endpoints are not nodes of the group are skipped (no dangling edges)
    store.write(group, edges=[Edge(src="d1/s/0", dst="ghost", type=EdgeType.RELATED_TO, group=group)])
    assert len(list(store.iter_edges(group, [EdgeType.RELATED_TO]))) == 1


# --------------------------------------------------------------------------- vectors


def test_vector_search_is_exact(store: GraphStore, group: str) -> None:
    rng = np.random.default_rng(7)
    ids = [f"v{i:03d}" for i in range(120)]
    mat = unit(rng, len(ids))
    store.write(group, [Node(id=i, label=Label.SENTENCE, group=group) for i in ids],
                vectors={VectorSpace.SENTENCE: (ids, mat)})
    for _ in range(5):
        q = rng.normal(size=DIM).astype(np.float32)
        qn = q / np.linalg.norm(q)
        expect = np.argsort(-(mat @ qn))[:10]
        got = store.vector_search(group, VectorSpace.SENTENCE, q, 10)
        assert [g[0] for g in got] == [ids[j] for j in expect]
        np.testing.assert_allclose([g[1] for g in got], (mat @ qn)[expect], atol=1e-4)
    # restrict_to: only the allowed ids are candidates
    allowed = ids[::7]
    got = store.vector_search(group, VectorSpace.SENTENCE, mat[3], 5, restrict_to=allowed)
    sub = mat[::7] @ mat[3]
    assert [g[0] for g in got] == [allowed[j] for j in np.argsort(-sub)[:5]]
    assert store.vector_search(group, VectorSpace.SENTENCE, mat[3], 5, restrict_to=["nope"]) == []
    # self-similarity is the best hit
    assert store.vector_search(group, VectorSpace.SENTENCE, mat[42], 1)[0][0] == "v042"
    assert store.vector_search(group, VectorSpace.CHUNK, mat[0], 3) == []
    np.testing.assert_allclose(store.get_vectors(group, VectorSpace.SENTENCE, ["v005", "nope", "v001"]),
                               np.stack([mat[5], np.zeros(DIM, np.float32), mat[1]]), atol=1e-6)
    all_ids, all_mat = store.all_vectors(group, VectorSpace.SENTENCE)
    assert sorted(all_ids) == ids
    np.testing.assert_allclose(all_mat[all_ids.index("v077")], mat[77], atol=1e-6)


def test_the_same_vector_searched_again_sees_other_vectors_and_writes(store: GraphStore, group: str) -> None:
    """Stages of one question search a space with the same vector (Route 5's structural
    seeds take 30 sentences, its vector anchors 10): each search answers for its own k, a
    different vector in between gets its own hits, and a write in between is seen."""
    rng = np.random.default_rng(11)
    ids = [f"r{i:03d}" for i in range(80)]
    mat = unit(rng, len(ids))
    store.write(group, [Node(id=i, label=Label.SENTENCE, group=group) for i in ids],
                vectors={VectorSpace.SENTENCE: (ids, mat)})
    q1, q2 = unit(rng, 2)

    def expect(m: np.ndarray, names: list[str], q: np.ndarray, k: int) -> list[str]:
        return [names[j] for j in np.argsort(-(m @ q), kind="stable")[:k]]

    top30 = store.vector_search(group, VectorSpace.SENTENCE, q1, 30)
    assert [i for i, _ in top30] == expect(mat, ids, q1, 30)
    assert store.vector_search(group, VectorSpace.SENTENCE, q1, 10) == top30[:10]
    assert [i for i, _ in store.vector_search(group, VectorSpace.SENTENCE, q2, 10)] == expect(mat, ids, q2, 10)
    assert store.vector_search(group, VectorSpace.SENTENCE, q1, 5) == top30[:5]
    # a new sentence that is q1 itself: the next search of q1 must rank it first
    store.write(group, [Node(id="r999", label=Label.SENTENCE, group=group)],
                vectors={VectorSpace.SENTENCE: (["r999"], q1[None, :])})
    again = store.vector_search(group, VectorSpace.SENTENCE, q1, 10)
    assert [i for i, _ in again] == ["r999", *[i for i, _ in top30[:9]]]


def test_vector_search_small_group_next_to_large_one(store: GraphStore, make_group: MakeGroup) -> None:
    """A 3-vector group returns its 3 hits although a 2,000-vector group sits right next to
    the query in the same space; k=5 on a 10-vector group returns 5 of that group only."""
    big, small, ten = make_group("-big"), make_group("-small"), make_group("-ten")
    rng = np.random.default_rng(3)
    q = unit(rng, 1)[0]
    near = q + 0.05 * rng.normal(size=(2000, DIM)).astype(np.float32)  # all closer than any small-group vector
    near /= np.linalg.norm(near, axis=1, keepdims=True)
    big_ids = [f"b{i}" for i in range(2000)]
    store.write(big, [Node(id=i, label=Label.CHUNK, group=big) for i in big_ids],
                vectors={VectorSpace.CHUNK: (big_ids, near)})
    far = -unit(rng, 3) * 0.1 + -q  # pointing away from q
    far /= np.linalg.norm(far, axis=1, keepdims=True)
    store.write(small, [Node(id=f"s{i}", label=Label.CHUNK, group=small) for i in range(3)],
                vectors={VectorSpace.CHUNK: ([f"s{i}" for i in range(3)], far)})
    hits = store.vector_search(small, VectorSpace.CHUNK, q, 5)
    assert sorted(h[0] for h in hits) == ["s0", "s1", "s2"]
    ten_ids = [f"t{i}" for i in range(10)]
    ten_mat = unit(rng, 10)
    store.write(ten, [Node(id=i, label=Label.CHUNK, group=ten) for i in ten_ids],
                vectors={VectorSpace.CHUNK: (ten_ids, ten_mat)})
    hits = store.vector_search(ten, VectorSpace.CHUNK, q, 5)
    assert len(hits) == 5 and all(h[0] in ten_ids for h in hits)
    assert [h[0] for h in hits] == [ten_ids[j] for j in np.argsort(-(ten_mat @ q))[:5]]
    assert len(store.vector_search(big, VectorSpace.CHUNK, q, 50)) == 50


def test_vector_search_ranks_equal_scores_by_id(store: GraphStore, group: str) -> None:
    """Duplicated passages score exactly alike; which of them a route sees (Route 5 takes
    1,000 chunk hits) must not depend on the order the vectors were written in or on how
    the top k was cut: equal scores go by id, at the k-th place too."""
    rng = np.random.default_rng(3)
    ids = [f"c{n:03d}" for n in range(120)]
    vectors = np.repeat(unit(rng, 40), 3, axis=0)  # every vector three times
    order = rng.permutation(len(ids))  # written in a shuffled order
    store.write(group, [Node(id=ids[i], label=Label.CHUNK, group=group) for i in order],
                vectors={VectorSpace.CHUNK: ([ids[i] for i in order], vectors[order])})
    for k in (1, 5, 31, 120, 500):
        q = unit(rng, 1)[0]
        scores = vectors @ q
        expect = sorted(range(len(ids)), key=lambda j: (-float(scores[j]), ids[j]))[:k]
        got = store.vector_search(group, VectorSpace.CHUNK, q, k)
        assert [i for i, _ in got] == [ids[j] for j in expect]
        np.testing.assert_allclose([s for _, s in got], scores[expect], atol=1e-4)
        assert all(isinstance(s, float) for _, s in got)
    allowed = ids[5::4]  # restricted: the same order among the allowed ids
    q = vectors[7]
    scores = vectors @ q
    expect = sorted((ids.index(a) for a in allowed), key=lambda j: (-float(scores[j]), ids[j]))[:6]
    got = store.vector_search(group, VectorSpace.CHUNK, q, 6, restrict_to=allowed)
    assert [i for i, _ in got] == [ids[j] for j in expect]


# --------------------------------------------------------------------------- deletes


def test_replace_doc(store: GraphStore, group: str) -> None:
    rng = np.random.default_rng(1)
    n1, e1 = doc(group, "d1", n_sent=4)
    n2, e2 = doc(group, "d2")
    store.write(group, n1, e1, {VectorSpace.SENTENCE: (sentence_ids("d1", 4), unit(rng, 4))})
    store.write(group, n2, e2, {VectorSpace.SENTENCE: (sentence_ids("d2"), unit(rng, 3))})
    cross = Edge(src="d1/s/3", dst="d2/s/0", type=EdgeType.RELATED_TO, group=group)
    store.write(group, edges=[cross])
    # d1 shrinks to 2 sentences: the old 4 must all go, with their vectors and edges
    n1b, e1b = doc(group, "d1", n_sent=2, title="Title d1 v2")
    store.write(group, n1b, e1b, {VectorSpace.SENTENCE: (sentence_ids("d1", 2), unit(rng, 2))},
                replace_doc="d1", meta={"doc_hash:d1": "v2"})
    assert {n.id for n in store.iter_nodes(group, doc_id="d1")} == {n.id for n in n1b}
    assert store.get_nodes(group, ["d1"])[0].props["title"] == "Title d1 v2"
    assert store.edges_of(group, ["d1/s/3"], direction="both") == []
    assert edge_keys(list(store.iter_edges(group))) == edge_keys(e1b) | edge_keys(e2)
    ids, _ = store.all_vectors(group, VectorSpace.SENTENCE)
    assert sorted(ids) == sorted(sentence_ids("d1", 2) + sentence_ids("d2"))
    assert store.get_meta(group, "doc_hash:d1") == "v2"


def test_delete_document(store: GraphStore, group: str) -> None:
    rng = np.random.default_rng(2)
    n1, e1 = doc(group, "d1")
    n2, e2 = doc(group, "d2")
    store.write(group, n1 + n2, e1 + e2, {VectorSpace.SENTENCE: (sentence_ids("d1") + sentence_ids("d2"), unit(rng, 6))})
    ent = Node(id="ent", label=Label.ENTITY, group=group, props={"name": "X"})
    store.write(group, [ent], [Edge(src="d1/s/0", dst="ent", type=EdgeType.MENTIONS, group=group),
                               Edge(src="d2/s/0", dst="ent", type=EdgeType.MENTIONS, group=group)])
    # an edge d1 owns although it touches only d2's nodes: it goes with d1
    store.write(group, edges=[Edge(src="d2/s/0", dst="d2/s/2", type=EdgeType.RELATED_TO, group=group, doc_id="d1")])
    removed = store.delete_document(group, "d1")
    assert removed == len(n1)
    assert store.get_nodes(group, [n.id for n in n1]) == []
    assert {n.id for n in store.iter_nodes(group)} == {n.id for n in n2} | {"ent"}
    assert edge_keys(list(store.iter_edges(group))) == edge_keys(e2) | {("d2/s/0", "MENTIONS", "ent")}
    assert sorted(store.all_vectors(group, VectorSpace.SENTENCE)[0]) == sentence_ids("d2")
    hits = store.vector_search(group, VectorSpace.SENTENCE, unit(rng, 1)[0], 10)
    assert sorted(h[0] for h in hits) == sentence_ids("d2")
    assert store.delete_document(group, "d1") == 0


def test_delete_derived_with_edge_src_label(store: GraphStore, group: str) -> None:
    rng = np.random.default_rng(4)
    n1, e1 = doc(group, "d1")
    n2, e2 = doc(group, "d2")
    ents = [Node(id=f"e{i}", label=Label.ENTITY, group=group, props={"name": f"E{i}"}) for i in range(3)]
    comm = Node(id="c0", label=Label.COMMUNITY, group=group, props={"summary": "s"})
    sims = [
        Edge(src="e0", dst="e1", type=EdgeType.SEMANTICALLY_SIMILAR, group=group),
        Edge(src="d1/s", dst="d2/s", type=EdgeType.SEMANTICALLY_SIMILAR, group=group),
        Edge(src="e0", dst="c0", type=EdgeType.BELONGS_TO, group=group),
        Edge(src="d1/s/0", dst="e2", type=EdgeType.MENTIONS, group=group),
    ]
    store.write(group, n1 + n2 + ents + [comm], e1 + e2 + sims,
                {VectorSpace.ENTITY: ([e.id for e in ents], unit(rng, 3)),
                 VectorSpace.COMMUNITY: (["c0"], unit(rng, 1))})
    # rebuild entity similarity only: the section similarity edge survives
    store.delete_derived(group, edge_types=[EdgeType.SEMANTICALLY_SIMILAR], edge_src_label=Label.ENTITY)
    assert edge_keys(list(store.iter_edges(group, [EdgeType.SEMANTICALLY_SIMILAR]))) == {
        ("d1/s", "SEMANTICALLY_SIMILAR", "d2/s")}
    # drop the community layer: nodes, their edges and vectors
    store.delete_derived(group, labels=[Label.COMMUNITY])
    assert list(store.iter_nodes(group, Label.COMMUNITY)) == []
    assert list(store.iter_edges(group, [EdgeType.BELONGS_TO])) == []
    assert store.all_vectors(group, VectorSpace.COMMUNITY)[0] == []
    # all derived edges of a type, any source
    store.delete_derived(group, edge_types=[EdgeType.SEMANTICALLY_SIMILAR, EdgeType.MENTIONS])
    assert list(store.iter_edges(group, [EdgeType.SEMANTICALLY_SIMILAR, EdgeType.MENTIONS])) == []
    assert edge_keys(list(store.iter_edges(group))) == edge_keys(e1 + e2)
    assert len(list(store.iter_nodes(group, Label.ENTITY))) == 3
    assert len(store.all_vectors(group, VectorSpace.ENTITY)[0]) == 3


# --------------------------------------------------------------------------- groups


def test_group_isolation(store: GraphStore, make_group: MakeGroup) -> None:
    a, b = make_group("-a"), make_group("-b")
    rng = np.random.default_rng(5)
    na, ea = doc(a, "d1")
    store.write(a, na, ea, {VectorSpace.SENTENCE: (sentence_ids("d1"), unit(rng, 3))}, meta={"k": 1})
    store.write(a, [Node(id="ent", label=Label.ENTITY, group=a, props={"name": "Shared"})])
    # b has a node with the same id as one of a's
    store.write(b, [Node(id="d1", label=Label.DOCUMENT, group=b, doc_id="d1", props={"title": "B's own"})])
    assert [n.props["title"] for n in store.get_nodes(b, ["d1", "d1/s/0"])] == ["B's own"]
    assert {n.id for n in store.iter_nodes(b)} == {"d1"}
    assert list(store.iter_nodes(b, Label.SENTENCE)) == []
    assert store.find_nodes(b, Label.ENTITY, "name", ["Shared"]) == []
    assert store.edges_of(b, ["d1", "d1/s/0"], direction="both") == []
    assert list(store.iter_edges(b)) == []
    assert store.vector_search(b, VectorSpace.SENTENCE, unit(rng, 1)[0], 5) == []
    assert store.all_vectors(b, VectorSpace.SENTENCE)[0] == []
    assert not store.get_vectors(b, VectorSpace.SENTENCE, ["d1/s/0"]).any()
    assert store.get_meta(b, "k") is None
    assert store.counts(b) == {"nodes": {"Document": 1}, "edges": {}, "vectors": {}}
    assert {a, b} <= set(store.groups())
    # deleting b leaves a untouched
    before = store.counts(a)
    store.delete_group(b)
    assert b not in store.groups()
    assert store.counts(a) == before and store.get_nodes(a, ["d1"])[0].props["title"] == "Title d1"


def test_meta_and_version(store: GraphStore, group: str) -> None:
    v0 = store.version(group)
    assert store.get_meta(group, "profile") is None
    store.set_meta(group, "profile", {"name": "default", "steps": ["a", "b"], "n": 3})
    v1 = store.version(group)
    assert v1 > v0
    assert store.get_meta(group, "profile") == {"name": "default", "steps": ["a", "b"], "n": 3}
    nodes, edges = doc(group, "d1")
    store.write(group, nodes, edges)
    v2 = store.version(group)
    assert v2 > v1
    store.delete_derived(group, edge_types=[EdgeType.NEXT])
    v3 = store.version(group)
    assert v3 > v2
    store.delete_document(group, "d1")
    v4 = store.version(group)
    assert v4 > v3
    store.delete_group(group)
    assert group not in store.groups()
    store.set_meta(group, "again", True)
    # versions never go back, so a cache keyed on an old version cannot match again
    assert store.version(group) > v4


def test_meta_patches_merge_and_concurrent_writers_keep_each_other_s_entries(store: GraphStore, group: str) -> None:
    """A MetaPatch updates the stored mapping entry by entry in the write's transaction, so
    writers patching different entries at once (two index runs into one group, each adding
    its documents) lose none of them."""
    store.write(group, meta={"docs": MetaPatch({"a": {"hash": "1"}})})
    store.write(group, meta={"docs": MetaPatch({"b": {"hash": "2"}})})
    assert store.get_meta(group, "docs") == {"a": {"hash": "1"}, "b": {"hash": "2"}}
    nodes, edges = doc(group, "d1")
    store.write(group, nodes, edges, meta={"docs": MetaPatch({"a": None, "c": {"hash": "3"}}), "plain": [1]})
    assert store.get_meta(group, "docs") == {"b": {"hash": "2"}, "c": {"hash": "3"}}
    assert store.get_meta(group, "plain") == [1]

    def writer(w: int) -> None:
        for i in range(6):
            store.write(group, meta={"docs": MetaPatch({f"w{w}-{i}": {"hash": str(i)}})})

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    docs = store.get_meta(group, "docs")
    assert set(docs) == {"b", "c"} | {f"w{w}-{i}" for w in range(4) for i in range(6)}


def test_write_batches_bumps_the_version(store: GraphStore, group: str) -> None:
    """However a store writes a call's batches (one transaction, or several in flight), the
    version moves once they are all written, so nothing cached before the call stays current."""
    first, first_edges = doc(group, "d1")
    store.write(group, first, first_edges)
    v0 = store.version(group)
    batches = [DocumentBatch(*doc(group, f"d{i}")) for i in range(2, 6)]
    store.write_batches(group, batches, meta=None)
    assert store.version(group) > v0
    assert {n.doc_id for n in store.iter_nodes(group, Label.DOCUMENT)} == {f"d{i}" for i in range(1, 6)}


def test_a_group_s_index_lock_is_held_by_one_run_at_a_time(store: GraphStore, make_group: MakeGroup) -> None:
    """While one index run holds a group's lock, a second run into that group is refused at
    once, from another thread as from this one; other groups stay free; the lock is free
    again once its holder is done, also when the holder raised."""
    group, other = make_group(), make_group()
    refused: list[BaseException] = []

    def second_run() -> None:
        try:
            with store.index_lock(group):
                pass
        except GroupBusyError as exc:
            refused.append(exc)

    with store.index_lock(group):
        busy = pytest.raises(GroupBusyError, match=f"group {group!r} of store .* another index run or delete")
        with busy, store.index_lock(group):
            pass
        thread = threading.Thread(target=second_run)
        thread.start()
        thread.join()
        assert len(refused) == 1
        with store.index_lock(other):
            pass
    with pytest.raises(RuntimeError), store.index_lock(group):
        raise RuntimeError("the run failed")
    with store.index_lock(group):
        pass


def test_failed_write_changes_nothing(store: GraphStore, group: str) -> None:
    nodes, edges = doc(group, "d1")
    store.write(group, nodes, edges)
    before = (store.counts(group), store.version(group))
    bad = {VectorSpace.SENTENCE: (["d1/s/0", "d1/s/1"], np.zeros((3, DIM), np.float32))}  # 2 ids, 3 rows
    with pytest.raises(StoreError):
        store.write(group, [Node(id="new", label=Label.ENTITY, group=group)], vectors=bad, replace_doc="d1")
    assert (store.counts(group), store.version(group)) == before


def test_write_batches_writes_every_batch_each_atomically(store: GraphStore, group: str) -> None:
    """The indexer's path for new documents: every batch lands whole, with its vectors, and
    the meta after them, on both backends (Neo4j keeps two batches in flight, the embedded
    store writes the call as one transaction)."""
    rng = np.random.default_rng(5)
    batches: list[DocumentBatch] = []
    vectors: dict[str, np.ndarray] = {}
    for b in range(7):
        nodes, edges, ids = [], [], []
        for d in range(3):
            n, e = doc(group, f"b{b}d{d}")
            nodes += n
            edges += e
            ids += sentence_ids(f"b{b}d{d}")
        mat = unit(rng, len(ids))
        vectors.update(zip(ids, mat, strict=True))
        batches.append(DocumentBatch(nodes, edges, {VectorSpace.SENTENCE: (ids, mat)}))
    v0 = store.version(group)
    store.write_batches(group, batches, meta={"documents": {"b0d0": "x"}})
    assert store.version(group) > v0
    assert store.get_meta(group, "documents") == {"b0d0": "x"}
    counts = store.counts(group)
    assert counts["nodes"][Label.DOCUMENT] == 21 and counts["nodes"][Label.SENTENCE] == 63
    assert counts["vectors"][VectorSpace.SENTENCE] == 63
    assert edge_keys(list(store.iter_edges(group))) == {k for b in batches for k in edge_keys(list(b.edges))}
    ids = sorted(vectors)
    assert np.allclose(store.get_vectors(group, VectorSpace.SENTENCE, ids), np.stack([vectors[i] for i in ids]), atol=1e-6)

    # a failing batch: the error reaches the caller, the meta is not written, the batch
    # itself leaves nothing behind; a one-writer store leaves nothing of the call at all
    other = f"{group}-2"
    try:
        good = DocumentBatch(*doc(other, "ok"))
        bad_nodes, bad_edges = doc(other, "bad")
        bad = DocumentBatch(bad_nodes, bad_edges, {VectorSpace.SENTENCE: (sentence_ids("bad"), unit(rng, 2))})  # 3 ids, 2 rows
        with pytest.raises(StoreError):
            store.write_batches(other, [good, bad, good], meta={"documents": {"ok": "x"}})
        written = {n.id for n in store.iter_nodes(other, Label.DOCUMENT)}
        assert written == (set() if store.write_concurrency <= 1 else {"ok"})
        assert store.get_meta(other, "documents") is None
    finally:
        store.delete_group(other)


def test_write_batches_checks_each_batch_s_vectors_against_its_own_ids(store: GraphStore, group: str) -> None:
    """Two batches whose ids and rows are each off by one, in opposite directions, add up
    to as many ids as rows; written together they must still fail, not pair vectors with
    the wrong ids."""
    rng = np.random.default_rng(8)
    a_nodes, a_edges = doc(group, "a")
    b_nodes, b_edges = doc(group, "b")
    short = DocumentBatch(a_nodes, a_edges, {VectorSpace.SENTENCE: (sentence_ids("a"), unit(rng, 2))})  # 3 ids, 2 rows
    long = DocumentBatch(b_nodes, b_edges, {VectorSpace.SENTENCE: (sentence_ids("b")[:2], unit(rng, 3))})  # 2 ids, 3 rows
    with pytest.raises(StoreError, match="ids but matrix shape"):
        store.write_batches(group, [short, long])
    assert VectorSpace.SENTENCE not in store.counts(group).get("vectors", {})


def test_vectors_with_nan_or_infinity_are_refused_before_anything_is_written(store: GraphStore, group: str) -> None:
    """Both backends, and ``write_batches`` merging batches for one transaction, check
    vectors the same way (``checked_vectors``): a non-finite value fails its write, which
    leaves nothing behind; a one-writer store's ``write_batches`` leaves nothing of the call."""
    rng = np.random.default_rng(9)
    for bad_value in (np.nan, np.inf):
        nodes, edges = doc(group, "d1")
        mat = unit(rng, 3)
        mat[1, 0] = bad_value
        before = (store.counts(group), store.version(group))
        with pytest.raises(StoreError, match="NaN or infinity"):
            store.write(group, nodes, edges, {VectorSpace.SENTENCE: (sentence_ids("d1"), mat)})
        assert (store.counts(group), store.version(group)) == before

        other = f"{group}-{bad_value}"
        try:
            good = DocumentBatch(*doc(other, "ok"))
            bad_nodes, bad_edges = doc(other, "bad")
            bad = DocumentBatch(bad_nodes, bad_edges, {VectorSpace.SENTENCE: (sentence_ids("bad"), mat)})
            with pytest.raises(StoreError, match="NaN or infinity"):
                store.write_batches(other, [good, bad])
            written = {n.id for n in store.iter_nodes(other, Label.DOCUMENT)}
            assert written == (set() if store.write_concurrency <= 1 else {"ok"})
            assert VectorSpace.SENTENCE not in store.counts(other).get("vectors", {})
        finally:
            store.delete_group(other)


def test_counts(store: GraphStore, group: str) -> None:
    rng = np.random.default_rng(6)
    nodes, edges = doc(group, "d1", n_sent=5)
    store.write(group, nodes, edges, {VectorSpace.SENTENCE: (sentence_ids("d1", 5), unit(rng, 5)),
                                      VectorSpace.SECTION: (["d1/s"], unit(rng, 1))})
    assert store.counts(group) == {
        "nodes": {"Document": 1, "Section": 1, "Sentence": 5},
        "edges": {"HAS_SECTION": 1, "PART_OF": 5, "NEXT": 4},
        "vectors": {"sentence": 5, "section": 1},
    }


def test_a_document_page_is_the_slice_of_the_listing_in_title_order(store: GraphStore, group: str) -> None:
    # titles that differ in case only, one without a title, equal titles (id decides), and
    # letters beyond ASCII; a Sentence that must not be listed
    titles = {"d1": "beta", "d2": "Alpha", "d3": None, "d4": "alpha", "d5": "Éclair", "d6": "éclair", "d7": "zeta",
              "d8": "Beta", "d9": "alpha"}
    nodes = [Node(id=d, label=Label.DOCUMENT, group=group, doc_id=d, props={} if t is None else {"title": t})
             for d, t in titles.items()]
    nodes.append(Node(id="s0", label=Label.SENTENCE, group=group, doc_id="d1", props={"text": "A sentence."}))
    store.write(group, nodes)
    expected = ["d3", "d2", "d4", "d9", "d1", "d8", "d7", "d5", "d6"]  # by code point after casefold: z < é
    assert [n.id for n in GraphStore.document_page(store, group, None)] == expected  # the default
    assert [n.id for n in store.document_page(group, None)] == expected
    for limit, offset in ((3, 0), (3, 3), (4, 7), (2, 9), (5, 20)):
        page = store.document_page(group, limit, offset)
        assert [n.id for n in page] == expected[offset : offset + limit], (limit, offset)
    assert store.document_page(group, 2, 1)[0] == next(n for n in nodes if n.id == "d2")  # whole nodes
    assert store.count_nodes(group, Label.DOCUMENT) == len(titles)


# --------------------------------------------------------------------------- injection

INJECTION_TITLE = 'x"}) MATCH (n) DETACH DELETE n //'
NASTY = "a'b\"c`d\\e}) RETURN 1 //; DROP TABLE nodes; --"


def test_injection_attempts_are_stored_verbatim(store: GraphStore, make_group: MakeGroup) -> None:
    bystander = make_group("-bystander")
    store.write(bystander, *doc(bystander, "keep"))
    before = store.counts(bystander)
    evil_group = make_group("`x` '\"}) MATCH (n) DETACH DELETE n //")
    nodes, edges = doc(evil_group, "d1", title=INJECTION_TITLE)
    nodes.append(Node(id=NASTY, label=Label.ENTITY, group=evil_group,
                      props={"name": NASTY, "text": INJECTION_TITLE, NASTY: NASTY}))
    edges.append(Edge(src="d1/s/0", dst=NASTY, type=EdgeType.MENTIONS, group=evil_group, doc_id="d1",
                      props={"why": INJECTION_TITLE}))
    store.write(evil_group, nodes, edges, meta={NASTY: INJECTION_TITLE})
    assert store.get_nodes(evil_group, ["d1"])[0].props["title"] == INJECTION_TITLE
    (ent,) = store.find_nodes(evil_group, Label.ENTITY, "name", [NASTY])
    assert ent.id == NASTY and ent.props == {"name": NASTY, "text": INJECTION_TITLE, NASTY: NASTY}
    assert store.find_nodes(evil_group, Label.DOCUMENT, "title", [INJECTION_TITLE])[0].id == "d1"
    assert [e.props for e in store.edges_of(evil_group, [NASTY], direction="in")] == [{"why": INJECTION_TITLE}]
    assert store.get_meta(evil_group, NASTY) == INJECTION_TITLE
    assert evil_group in store.groups()
    assert store.counts(evil_group)["nodes"] == {"Document": 1, "Section": 1, "Sentence": 3, "Entity": 1}
    # nothing else changed
    assert store.counts(bystander) == before
    assert store.get_nodes(bystander, ["keep"])[0].props["title"] == "Title keep"
    assert store.delete_document(evil_group, "d1") == 5
    assert store.counts(bystander) == before


# --------------------------------------------------------------------------- graph export


def graph_fixture(store: GraphStore, group: str) -> None:
    rng = np.random.default_rng(9)
    for d in ("d1", "d2", "d3"):
        store.write(group, *doc(group, d, n_sent=4))
    ids = [f"d{d}/s/{i}" for d in (1, 2, 3) for i in range(4)]
    sims = []
    for _ in range(15):
        a, b = rng.choice(len(ids), 2, replace=False)
        sims.append(Edge(src=ids[a], dst=ids[b], type=EdgeType.RELATED_TO, group=group,
                         props={"similarity": float(np.round(rng.uniform(0.9, 1.0), 3))}))
    store.write(group, edges=sims)


def test_adjacency_export(store: GraphStore, group: str) -> None:
    graph_fixture(store, group)
    clear_derived()
    view = adjacency(store, group, {EdgeType.NEXT: 1.0, EdgeType.RELATED_TO: 2.0}, weight_prop="similarity")
    expect: dict[tuple[str, str], float] = {}
    for e in store.iter_edges(group):
        if e.type == EdgeType.NEXT:
            w = 1.0
        elif e.type == EdgeType.RELATED_TO:
            w = 2.0 * e.props["similarity"]
        else:
            continue
        for key in ((e.src, e.dst), (e.dst, e.src)):
            expect[key] = expect.get(key, 0.0) + w
    dense = view.matrix.toarray()
    got = {(view.ids[i], view.ids[j]): dense[i, j] for i, j in zip(*np.nonzero(dense), strict=True)}
    assert got.keys() == expect.keys()
    for key, w in expect.items():
        assert got[key] == pytest.approx(w)
    # cached until the next write, then rebuilt
    assert adjacency(store, group, {EdgeType.NEXT: 1.0, EdgeType.RELATED_TO: 2.0}, weight_prop="similarity") is view
    store.delete_derived(group, edge_types=[EdgeType.RELATED_TO])
    view2 = adjacency(store, group, {EdgeType.NEXT: 1.0, EdgeType.RELATED_TO: 2.0}, weight_prop="similarity")
    assert view2 is not view and view2.matrix.nnz == 2 * 9


def test_vectors_belong_to_nodes(store: GraphStore, group: str) -> None:
    rng = np.random.default_rng(11)
    store.write(group, [Node(id="a", label=Label.ENTITY, group=group), Node(id="b", label=Label.ENTITY, group=group)])
    store.write(group, vectors={VectorSpace.ENTITY: (["a", "ghost", "b"], unit(rng, 3))})
    assert sorted(store.all_vectors(group, VectorSpace.ENTITY)[0]) == ["a", "b"]
    # re-upserting a node keeps its vector; writing a vector again replaces it
    store.write(group, [Node(id="a", label=Label.ENTITY, group=group, props={"name": "A"})])
    v = unit(rng, 1)
    store.write(group, vectors={VectorSpace.ENTITY: (["b"], v)})
    np.testing.assert_allclose(store.get_vectors(group, VectorSpace.ENTITY, ["b"]), v, atol=1e-6)
    assert store.counts(group)["vectors"] == {"entity": 2}
