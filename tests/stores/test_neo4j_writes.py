"""Neo4j batch writes on the real server: vectors set by the node statement itself keep
upsert semantics (a node rewritten without a vector keeps its vector, last duplicate wins,
vectors of nodes written earlier still land), and vector parameters never reach the
driver's debug-log ``repr`` as text."""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Iterator

import numpy as np
import pytest
from graphroute.core.api.models import Edge, EdgeType, Label, Node, VectorSpace
from graphroute.core.api.store import DocumentBatch
from graphroute.core.errors import StoreError
from graphroute.plugins.stores.neo4j_store import Neo4jStore, _Vector

from .test_neo4j_errors import NEO4J_URI, PASSWORD, needs_server

DIM = 8


def unit(rng: np.random.Generator, n: int, dim: int = DIM) -> np.ndarray:
    m = rng.normal(size=(n, dim)).astype(np.float32)
    return m / np.linalg.norm(m, axis=1, keepdims=True)


def sentence(group: str, i: int, doc: str = "d1") -> Node:
    return Node(id=f"{doc}/s/{i}", label=Label.SENTENCE, group=group, doc_id=doc, props={"text": f"s{i}"})


@pytest.fixture
def store() -> Iterator[Neo4jStore]:
    s = Neo4jStore(NEO4J_URI, "neo4j", PASSWORD)
    yield s
    s.close()


@pytest.fixture
def group(store: Neo4jStore) -> Iterator[str]:
    g = f"t-writes-{uuid.uuid4().hex[:8]}"
    yield g
    store.delete_group(g)


def test_vector_repr_is_short_and_it_is_still_a_list() -> None:
    v = _Vector([0.5] * 384)
    assert isinstance(v, list) and v == [0.5] * 384
    assert len(repr(v)) < 40 and "384" in repr(v)


@needs_server
def test_inline_vectors_round_trip_with_nodes_and_edges(store: Neo4jStore, group: str) -> None:
    rng = np.random.default_rng(1)
    nodes = [sentence(group, i) for i in range(30)]
    edges = [Edge(src=f"d1/s/{i}", dst=f"d1/s/{i + 1}", type=EdgeType.NEXT, group=group, doc_id="d1")
             for i in range(29)]
    ids = [n.id for n in nodes]
    sent, chunk = unit(rng, 30), unit(rng, 5, 16)
    store.write(group, nodes, edges, {VectorSpace.SENTENCE: (ids, sent), VectorSpace.CHUNK: (ids[:5], chunk)})
    np.testing.assert_allclose(store.get_vectors(group, VectorSpace.SENTENCE, ids), sent, atol=1e-6)
    np.testing.assert_allclose(store.get_vectors(group, VectorSpace.CHUNK, ids[:5]), chunk, atol=1e-6)
    assert store.counts(group) == {
        "nodes": {"Sentence": 30}, "edges": {"NEXT": 29}, "vectors": {"sentence": 30, "chunk": 5},
    }
    assert store.vector_search(group, VectorSpace.SENTENCE, sent[7], 1)[0][0] == "d1/s/7"


@needs_server
def test_rewriting_a_node_without_its_vector_keeps_the_vector(store: Neo4jStore, group: str) -> None:
    rng = np.random.default_rng(2)
    vec = unit(rng, 1)
    store.write(group, [sentence(group, 0)], vectors={VectorSpace.SENTENCE: (["d1/s/0"], vec)})
    renamed = Node(id="d1/s/0", label=Label.SENTENCE, group=group, doc_id="d1", props={"text": "new"})
    store.write(group, [renamed])
    assert store.get_nodes(group, ["d1/s/0"])[0].props == {"text": "new"}
    np.testing.assert_allclose(store.get_vectors(group, VectorSpace.SENTENCE, ["d1/s/0"]), vec, atol=1e-6)


@needs_server
def test_vectors_for_nodes_of_an_earlier_write_and_duplicates(store: Neo4jStore, group: str) -> None:
    """Ids that are not among this call's nodes take the MATCH pass; for a duplicated id
    the last vector wins on both paths, as in the embedded store."""
    rng = np.random.default_rng(3)
    store.write(group, [sentence(group, i) for i in range(3)])
    first, later = unit(rng, 2), unit(rng, 2)
    ids = ["d1/s/0", "d1/s/3", "d1/s/0", "d1/s/3"]  # s/0 exists already; s/3 is written now
    store.write(group, [sentence(group, 3)], vectors={VectorSpace.SENTENCE: (ids, np.vstack([first, later]))})
    got = store.get_vectors(group, VectorSpace.SENTENCE, ["d1/s/0", "d1/s/3", "d1/s/1"])
    np.testing.assert_allclose(got[0], later[0], atol=1e-6)
    np.testing.assert_allclose(got[1], later[1], atol=1e-6)
    assert not got[2].any()
    # an id with no node at all gets no vector and creates no node
    store.write(group, vectors={VectorSpace.SENTENCE: (["ghost"], unit(rng, 1))})
    assert store.get_nodes(group, ["ghost"]) == []
    assert store.counts(group)["vectors"] == {"sentence": 2}


@needs_server
def test_dimension_change_fails_before_any_node_is_written(store: Neo4jStore, group: str) -> None:
    rng = np.random.default_rng(4)
    store.write(group, [sentence(group, 0)], vectors={VectorSpace.SENTENCE: (["d1/s/0"], unit(rng, 1))})
    with pytest.raises(StoreError, match="8-d vectors; got 16-d"):
        store.write(group, [sentence(group, 1)], vectors={VectorSpace.SENTENCE: (["d1/s/1"], unit(rng, 1, 16))})
    assert [n.id for n in store.iter_nodes(group)] == ["d1/s/0"]  # the failed write left nothing


@needs_server
def test_driver_debug_log_never_prints_vector_values(
    store: Neo4jStore, group: str, caplog: pytest.LogCaptureFixture
) -> None:
    """With the driver's debug log on, a write's vectors show as a short placeholder: the
    driver formats every parameter for that line, so a list's own repr would cost seconds."""
    rng = np.random.default_rng(5)
    vec = unit(rng, 1, 384)
    with caplog.at_level(logging.DEBUG, logger="neo4j"):
        store.write(group, [sentence(group, 0)], vectors={VectorSpace.SENTENCE: (["d1/s/0"], vec)})
    runs = [r.getMessage() for r in caplog.records if "RUN" in r.getMessage() and "MERGE (n:GRNode" in r.getMessage()]
    assert runs, "the driver logged no RUN line for the node statement"
    assert "<vector of 384 floats>" in runs[0]
    assert repr(float(vec[0, 0])) not in runs[0]


@needs_server
@pytest.mark.parametrize("first_alone", [True, False])
def test_concurrent_batches_of_a_new_group_do_not_deadlock(
    store: Neo4jStore, group: str, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch, first_alone: bool
) -> None:
    """``write_batches`` keeps two transactions in flight; the group's first write records
    the vector dimensions on its meta node, where two first writes at once can deadlock
    when every batch also bumps the version there (the driver retries after ~1 s, so the
    data stays right - only slow). Writing the first batch alone avoids it. Batches in
    flight leave the bump to the call's last write, so the ``first_alone=False`` case
    should not collide either; both show that the data is right either way."""
    rng = np.random.default_rng(3)
    batches = []
    for b in range(6):
        nodes = [sentence(group, i, doc=f"d{b}") for i in range(40)]
        ids = [n.id for n in nodes]
        batches.append(DocumentBatch(nodes, [], {VectorSpace.SENTENCE: (ids, unit(rng, 40)), VectorSpace.CHUNK: (ids[:5], unit(rng, 5))}))
    assert store.write_concurrency == 2
    if not first_alone:  # every batch through the pool, the first included
        monkeypatch.setattr(store, "write_concurrency", 6)
        batches = [DocumentBatch([], [], None), *batches]  # an empty first batch records nothing
    with caplog.at_level(logging.INFO, logger="neo4j"):
        store.write_batches(group, batches)
    assert store.counts(group)["nodes"].get("Sentence", 0) == 240
    deadlocks = [r for r in caplog.records if "DeadlockDetected" in r.getMessage()]
    if first_alone:
        assert not deadlocks


@needs_server
def test_once_the_dimensions_are_recorded_every_batch_goes_through_the_pool(
    store: Neo4jStore, group: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first batch of a call is written alone only while it may record a vector space's
    dimension: the indexer calls ``write_batches`` once per window, and a first batch alone
    in every window left the second writer idle for it."""
    rng = np.random.default_rng(4)

    def window(w: int) -> list[DocumentBatch]:
        out = []
        for b in range(3):
            nodes = [sentence(group, i, doc=f"w{w}d{b}") for i in range(5)]
            out.append(DocumentBatch(nodes, [], {VectorSpace.SENTENCE: ([n.id for n in nodes], unit(rng, 5))}))
        return out

    threads: list[str] = []
    write_in_flight = store.write_in_flight

    def recording_write(g: str, batch: DocumentBatch) -> None:
        threads.append(threading.current_thread().name)
        write_in_flight(g, batch)

    monkeypatch.setattr(store, "write_in_flight", recording_write)
    store.write_batches(group, window(0))  # the group's first call: sentence's dimension is new
    assert threads[0] == threading.current_thread().name
    assert all(t.startswith("graphroute-write") for t in threads[1:])
    threads.clear()
    store.write_batches(group, window(1))
    assert len(threads) == 3 and all(t.startswith("graphroute-write") for t in threads)
    chunk = [sentence(group, i, doc="w2d0") for i in range(2)]
    threads.clear()
    store.write_batches(group, [DocumentBatch(chunk, [], {VectorSpace.CHUNK: ([n.id for n in chunk], unit(rng, 2))}),
                                *window(3)])
    assert threads[0] == threading.current_thread().name  # a new space: its first batch alone again
    assert store.counts(group)["nodes"]["Sentence"] == 47


@needs_server
def test_batches_in_flight_leave_the_version_bump_to_the_call_s_last_write(store: Neo4jStore, group: str) -> None:
    """A batch written in flight commits its data without touching the group's version (its
    meta node's lock would serialise the writers' commits); ``write_batches`` bumps it once
    at the end, so caches keyed on the version (``per_version``) still see every call."""
    rng = np.random.default_rng(5)
    store.write(group, [sentence(group, 0, doc="d0")], [])
    v0 = store.version(group)
    nodes = [sentence(group, i, doc="d1") for i in range(3)]
    store.write_in_flight(group, DocumentBatch(nodes, [], {VectorSpace.SENTENCE: ([n.id for n in nodes], unit(rng, 3))}))
    assert store.counts(group)["nodes"]["Sentence"] == 4
    assert store.version(group) == v0
    batches = []
    for b in range(4):
        more = [sentence(group, i, doc=f"e{b}") for i in range(3)]
        batches.append(DocumentBatch(more, [], {VectorSpace.SENTENCE: ([n.id for n in more], unit(rng, 3))}))
    store.write_batches(group, batches)
    assert store.counts(group)["nodes"]["Sentence"] == 16
    assert store.version(group) > v0


def _edge_rows(store: Neo4jStore, group: str) -> list[tuple[str, str, str, str | None, dict]]:
    return sorted((e.src, str(e.type), e.dst, e.doc_id, e.props) for e in store.iter_edges(group))


@needs_server
def test_a_batch_in_flight_creates_every_edge_it_touches_once_and_merges_the_others(
    store: Neo4jStore, group: str
) -> None:
    """``write_in_flight`` creates a new batch's nodes and every edge with an endpoint among
    them in one statement: an edge written twice exists once with its last values, whether
    it stays inside the batch or joins a stored node (either way); an edge to a node that is
    not stored is not made (as MERGE makes none); an edge between two stored nodes still goes
    through MERGE, so one that exists is not doubled."""
    rng = np.random.default_rng(11)
    old = [sentence(group, 98, doc="old"), sentence(group, 99, doc="old")]
    between_old = Edge(src=old[0].id, type=EdgeType.NEXT, dst=old[1].id, group=group, doc_id="old", props={"v": 1})
    store.write(group, old, [between_old])
    nodes = [sentence(group, i, doc="d1") for i in range(3)]
    edges = [
        Edge(src=nodes[0].id, type=EdgeType.NEXT, dst=nodes[1].id, group=group, doc_id="d1", props={"n": 1}),
        Edge(src=nodes[0].id, type=EdgeType.NEXT, dst=nodes[1].id, group=group, doc_id="d1", props={"n": 2}),
        Edge(src=nodes[1].id, type=EdgeType.NEXT, dst=nodes[2].id, group=group, doc_id="d1"),
        Edge(src=nodes[2].id, type=EdgeType.PART_OF, dst=nodes[0].id, group=group, doc_id="d1"),
        # to a stored node, twice (the last values win), and from a stored node
        Edge(src=nodes[2].id, type=EdgeType.MENTIONS, dst=old[0].id, group=group, doc_id="d1", props={"w": 0.1}),
        Edge(src=nodes[2].id, type=EdgeType.MENTIONS, dst=old[0].id, group=group, doc_id="d1", props={"w": 0.5}),
        Edge(src=nodes[1].id, type=EdgeType.MENTIONS, dst=old[0].id, group=group, doc_id="d1"),
        Edge(src=old[1].id, type=EdgeType.RELATED_TO, dst=nodes[0].id, group=group, props={"x": 1}),
        Edge(src=nodes[0].id, type=EdgeType.MENTIONS, dst="nowhere", group=group, doc_id="d1"),
        # between two stored nodes: MERGE finds the one written above and sets its values
        Edge(src=old[0].id, type=EdgeType.NEXT, dst=old[1].id, group=group, doc_id="old", props={"v": 2}),
    ]
    store.write_in_flight(group, DocumentBatch(nodes, edges, {VectorSpace.SENTENCE: ([n.id for n in nodes], unit(rng, 3))}))
    assert _edge_rows(store, group) == sorted(
        [
            (nodes[0].id, "NEXT", nodes[1].id, "d1", {"n": 2}),
            (nodes[1].id, "NEXT", nodes[2].id, "d1", {}),
            (nodes[2].id, "PART_OF", nodes[0].id, "d1", {}),
            (nodes[2].id, "MENTIONS", old[0].id, "d1", {"w": 0.5}),
            (nodes[1].id, "MENTIONS", old[0].id, "d1", {}),
            (old[1].id, "RELATED_TO", nodes[0].id, None, {"x": 1}),
            (old[0].id, "NEXT", old[1].id, "old", {"v": 2}),
        ]
    )
    assert len(store.vector_search(group, VectorSpace.SENTENCE, unit(rng, 1)[0], 10)) == 3  # the batch's vectors
    assert store.delete_document(group, "d1") == 3  # the edges it owns went with it
    assert _edge_rows(store, group) == [(old[0].id, "NEXT", old[1].id, "old", {"v": 2})]


@needs_server
def test_a_batch_in_flight_whose_node_exists_is_merged_instead(store: Neo4jStore, group: str) -> None:
    """A batch that breaks write_batches' "new documents" contract (a node of it is stored
    already) fails the create statement's unique constraint, which rolls it back whole; it is
    then written through MERGE, so nothing is doubled and nothing of it is lost."""
    rng = np.random.default_rng(12)
    first = [sentence(group, i, doc="d1") for i in range(2)]
    store.write(group, first, [Edge(src=first[0].id, type=EdgeType.NEXT, dst=first[1].id, group=group, doc_id="d1")])
    again = [*first, sentence(group, 2, doc="d1")]
    edges = [
        Edge(src=first[0].id, type=EdgeType.NEXT, dst=first[1].id, group=group, doc_id="d1"),
        Edge(src=first[1].id, type=EdgeType.NEXT, dst=again[2].id, group=group, doc_id="d1"),
    ]
    store.write_in_flight(group, DocumentBatch(again, edges, {VectorSpace.SENTENCE: ([n.id for n in again], unit(rng, 3))}))
    assert store.counts(group)["nodes"]["Sentence"] == 3
    assert _edge_rows(store, group) == sorted(
        [(first[0].id, "NEXT", first[1].id, "d1", {}), (first[1].id, "NEXT", again[2].id, "d1", {})]
    )


@needs_server
@pytest.mark.parametrize("quantized", [False, True])
def test_the_vector_index_is_created_quantized_only_when_asked(group: str, quantized: bool) -> None:
    """``vector_quantization`` (off by default) decides how the store creates a space's vector
    index; the server reports it back in the index's config (2026.08: a quantization type,
    5.26: an ``enabled`` flag)."""
    space = f"q_{'on' if quantized else 'off'}"
    s = Neo4jStore(NEO4J_URI, "neo4j", PASSWORD, vector_quantization=quantized)
    try:
        name = f"gr_vec_{space}_{DIM}"
        with s._driver.session() as session:
            session.run(f"DROP INDEX {name} IF EXISTS").consume()  # from an earlier run, maybe otherwise made
        nodes = [sentence(group, i) for i in range(3)]
        s.write(group, nodes, [], {space: ([n.id for n in nodes], unit(np.random.default_rng(6), 3))})
        with s._driver.session() as session:
            rec = session.run("SHOW VECTOR INDEXES YIELD name, options WHERE name = $n RETURN options", n=name).single()
        assert rec is not None
        config = rec["options"]["indexConfig"]
        on = config.get("vector.quantization.enabled", config.get("vector.quantization.type", "NONE") != "NONE")
        assert on is quantized
        assert [i for i, _ in s.vector_search(group, space, unit(np.random.default_rng(6), 3)[0], 1)] == [nodes[0].id]
    finally:
        s.delete_group(group)
        s.close()


def _vector_indexes(store: Neo4jStore) -> dict[str, str]:
    with store._driver.session() as session:
        return {r["name"]: r["state"] for r in session.run("SHOW VECTOR INDEXES YIELD name, state RETURN name, state")}


@needs_server
def test_bulk_load_builds_the_vector_indexes_when_it_ends(group: str) -> None:
    """Inside ``bulk_load`` the vector indexes are gone (writes do not keep them up); when it
    ends they are built from the stored vectors - those written before, inside, and of a space
    first seen inside - and answer searches (``exact_max=0``: through the index)."""
    s = Neo4jStore(NEO4J_URI, "neo4j", PASSWORD, exact_max=0)
    rng = np.random.default_rng(21)
    name, new_name = f"gr_vec_sentence_{DIM}", f"gr_vec_bulk_new_{DIM}"
    try:
        before = [sentence(group, i, doc="d0") for i in range(5)]
        s.write(group, before, [], {VectorSpace.SENTENCE: ([n.id for n in before], unit(rng, 5))})
        assert name in _vector_indexes(s)
        inside = [sentence(group, i, doc="d1") for i in range(5, 40)]
        vecs = unit(rng, len(inside))
        with s.bulk_load():
            assert name not in _vector_indexes(s)
            s.write_batches(group, [DocumentBatch(inside[:20], [], {VectorSpace.SENTENCE: ([n.id for n in inside[:20]], vecs[:20])}),
                                    DocumentBatch(inside[20:], [], {VectorSpace.SENTENCE: ([n.id for n in inside[20:]], vecs[20:])})])
            s.write(group, [], [], {"bulk_new": ([inside[0].id], vecs[:1])})
            assert name not in _vector_indexes(s) and new_name not in _vector_indexes(s)
        indexes = _vector_indexes(s)
        assert indexes[name] == "ONLINE" and indexes[new_name] == "ONLINE"
        for i in (0, 7, 34):
            assert s.vector_search(group, VectorSpace.SENTENCE, vecs[i], 1)[0][0] == inside[i].id
            assert s.last_search_path == "index"
        assert [h for h, _ in s.vector_search(group, "bulk_new", vecs[0], 1)] == [inside[0].id]
    finally:
        with s._driver.session() as session:
            session.run(f"DROP INDEX {new_name} IF EXISTS").consume()
        s.close()
