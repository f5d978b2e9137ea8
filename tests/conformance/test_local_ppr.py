"""The ppr stage's local solver (``solver: push``) against the exact one, on every backend.

A typed graph with hubs is written straight into the store (entities, chunks, sections and
the sentence mentions the walk must skip); the push reads it through ``GraphStore.neighbours``
and must stay within the bound it reports at every node, agree with the direct solve on
the ranking, and never read a component its seeds cannot reach.
"""

from __future__ import annotations

from dataclasses import asdict
from itertools import pairwise, product

import numpy as np
import pytest
from graphroute.core.api.models import Edge, EdgeType, Label, Node, Seed
from graphroute.core.api.stage import QueryState, StageContext
from graphroute.core.api.store import GraphStore, clear_derived
from graphroute.core.lib.entities import OWN_PAGES_META
from graphroute.core.query.services import Services
from graphroute.plugins.expanders.graph import PPR, NodeMass, PPRPassages, typed_graph
from graphroute.plugins.expanders.local_ppr import Paths
from graphroute.plugins.expanders.mentions import chunk_order, chunks_in_order

ROUTE5_PATHS = {"weight_section": 0.0, "weight_shares": 0.0, "weight_hub": 0.0, "weight_similar": 0.0, "weight_title": 1.0}


def typed_corpus(store: GraphStore, group: str, seed: int, prefix: str = "", docs: int = 60) -> list[str]:
    """Documents of chunks (sentences mention entities too), sections, Zipf-distributed
    entity mentions (hubs), co-occurrence, entity and section similarity, shared and hub
    entities, and every fifth document an entity's own page (OWN_PAGE); returns the entity
    ids."""
    rng = np.random.default_rng(seed)
    ents = [f"ent:{prefix}e{i}" for i in range(120)]
    nodes = [Node(id=e, label=Label.ENTITY, group=group, props={"name": e[4:]}) for e in ents]
    edges: list[Edge] = []
    pick = iter((rng.zipf(1.7, 20_000) - 1) % len(ents))

    def add(a: str, b: str, t: str) -> None:
        edges.append(Edge(src=a, dst=b, type=t, group=group))

    for d in range(docs):
        doc = f"{prefix}d{d}"
        sec = f"{doc}/sec"
        nodes.append(Node(id=sec, label=Label.SECTION, group=group, doc_id=doc))
        for c in range(3):
            chunk = f"{doc}:chk{c}"
            nodes.append(Node(id=chunk, label=Label.CHUNK, group=group, doc_id=doc, props={"index": c, "text": chunk}))
            add(chunk, sec, EdgeType.IN_SECTION)
            named = sorted({ents[next(pick)] for _ in range(int(rng.integers(1, 5)))})
            for e in named:
                add(chunk, e, EdgeType.MENTIONS)
                sent = f"{chunk}/s{e}"
                nodes.append(Node(id=sent, label=Label.SENTENCE, group=group, doc_id=doc))
                add(sent, e, EdgeType.MENTIONS)
            for a, b in pairwise(named):
                add(a, b, EdgeType.CO_OCCURS)
            if d % 5 == 0:
                add(chunk, ents[(7 * d) % len(ents)], EdgeType.OWN_PAGE)
        add(sec, ents[next(pick)], EdgeType.HAS_HUB_ENTITY)
    for _ in range(40):
        a, b = rng.choice(len(ents), 2, replace=False)
        add(ents[a], ents[b], EdgeType.SEMANTICALLY_SIMILAR)
        x, y = rng.choice(docs, 2, replace=False)
        add(f"{prefix}d{x}/sec", f"{prefix}d{y}/sec", EdgeType.SEMANTICALLY_SIMILAR)
        add(f"{prefix}d{x}/sec", f"{prefix}d{y}/sec", EdgeType.SHARES_ENTITY)
    store.write(group, nodes, edges)
    store.set_meta(group, OWN_PAGES_META, {"edges": sum(e.type == EdgeType.OWN_PAGE for e in edges)})
    return ents


def run(store: GraphStore, group: str, seeds: list[Seed], **params: object) -> tuple[QueryState, dict[str, object]]:
    state = QueryState("q", group)
    state.seeds = list(seeds)
    ctx = StageContext(services=Services(store, group), stage_id="ppr")
    PPR(PPR.Params(**params)).run(state, ctx)  # type: ignore[arg-type]
    return state, ctx.stats


def seeds_for(ents: list[str], seed: int) -> list[Seed]:
    rng = np.random.default_rng(seed)
    picked = [ents[int(i)] for i in rng.choice(len(ents), 4, replace=False)]
    out = [Seed(name=e, node_id=e, weight=float(rng.random() + 0.2)) for e in picked]
    out.append(Seed(name="passage", node_id="d3:chk1", weight=0.5, tier="passage"))
    out.append(Seed(name="unknown", node_id="ent:not-a-node", weight=0.3))  # keeps its teleport share
    return out


def call_push(
    store: GraphStore, group: str, seeds: list[Seed], paths: dict[str, float], **config: object
) -> tuple[dict[str, float], dict[str, object]]:
    """graphroute.push called with ``config`` (over damping 0.5, eps 1e-4, no row limit) on the
    walk of the ppr parameters ``paths``: its scores by node id, and its stats."""
    walk = Paths(**asdict(PPR(PPR.Params(**paths)).weights()))  # type: ignore[arg-type]
    base = {"damping": 0.5, "eps": 1e-4, "drain": 1e-3, "max_rows": 10**9, "types": walk.edge_types(), "weights": asdict(walk)}
    rows = store._query(  # type: ignore[attr-defined]
        "push", "CALL graphroute.push($g, $seeds, $weights, $config) YIELD ids, scores, stats RETURN ids, scores, stats",
        g=group, seeds=[s.node_id for s in seeds], weights=[s.weight for s in seeds], config={**base, **config},
    )
    return dict(zip(rows[0]["ids"], rows[0]["scores"], strict=True)), dict(rows[0]["stats"])


@pytest.mark.parametrize("engine", ["auto", "client"])
@pytest.mark.parametrize("paths", [{}, ROUTE5_PATHS], ids=["route2-paths", "route5-paths"])
def test_push_stays_within_its_bound_and_ranks_as_the_exact_solver(
    store: GraphStore, group: str, paths: dict[str, float], engine: str
) -> None:
    """Both engines: ``auto`` runs inside the database where the store can (Neo4j with
    graphroute's procedures), ``client`` reads the store a frontier at a time."""
    ents = typed_corpus(store, group, 3)
    in_database = engine == "auto" and store.backend == "neo4j"
    clear_derived()
    weights = PPR(PPR.Params(**paths)).weights()  # type: ignore[arg-type]
    g = typed_graph(store, group, weights)
    degree = dict(zip(g.ids, np.asarray(g.adjacency.sum(axis=0)).ravel().tolist(), strict=True))
    for k in range(2):
        seeds = seeds_for(ents, k)
        exact_state, _ = run(store, group, seeds, solver="direct", top_k=200, budget=1.0, **paths)
        exact_ent = {e.id: e.score for e in exact_state.entities}
        exact_top = [e.id for e in exact_state.entities[:10]]
        exact_mass = exact_state.node_scores
        for eps, min_overlap in ((1e-4, 0.6), (1e-6, 0.9), (1e-9, 1.0)):
            state, stats = run(store, group, seeds, solver="push", push_eps=eps, push_tolerance=None, top_k=200, budget=1.0,
                               push_engine=engine, **paths)
            assert stats["solver"] == "push" and str(stats["engine"]).startswith("forward push")
            assert ("inside the database" in str(stats["engine"])) == in_database
            assert stats["seeds_in_graph"] == len({s.node_id for s in seeds if degree.get(s.node_id, 0.0) > 0})
            outside = {s.node_id for s in seeds} - set(g.index)  # seeds without a typed edge
            assert 0 < int(stats["nodes_touched"]) <= len(g.ids) + len(outside)  # type: ignore[call-overload]
            bound = float(stats["error_bound"])  # type: ignore[arg-type]
            # every entity's score is within bound x its degree of the exact one (below it but
            # for the remainder's share, which is within the bound too) ...
            pushed = {e.id: e.score for e in state.entities}
            for node, exact_score in exact_ent.items():
                gap = exact_score - pushed.get(node, 0.0)
                assert abs(gap) <= bound * degree.get(node, 0.0) + 1e-12, (node, eps)
            # ... and every chunk's and section's mass
            mass = state.node_scores
            assert isinstance(mass, NodeMass) and mass.is_chunk is not None
            for node, m in exact_mass.items():
                gap = m - mass.get(node, 0.0)
                assert abs(gap) <= bound * degree.get(node, 0.0) + 1e-12, (node, eps)
            top = [e.id for e in state.entities[:10]]
            assert len(set(top) & set(exact_top)) / len(exact_top) >= min_overlap, (eps, top, exact_top)
        assert top == exact_top  # eps 1e-9: the same order
        # with a tolerance the push goes on until its ranking is certified within that share
        # of the smallest score it ranks: no ranked score is below the exact one by more, and
        # no node it does not rank is above the smallest ranked score by more
        state, stats = run(store, group, seeds, solver="push", push_eps=1e-3, push_tolerance=0.05, top_k=10, budget=1.0, **paths)
        assert float(stats["eps"]) < 1e-3 and stats["certified"] is True  # type: ignore[arg-type]
        share = float(stats["ranked_error"])  # type: ignore[arg-type]
        assert 0.0 <= share <= 0.05
        mass = state.node_scores
        assert isinstance(mass, NodeMass)
        for ranked, exact in (
            ({e.id: e.score for e in state.entities}, exact_ent),
            (dict(mass.top(10)), {c: m for c, m in exact_mass.items() if c in set(g.ids) and g.is_chunk is not None and g.is_chunk[g.index[c]]}),
        ):
            floor = min(ranked.values())
            for node, score in ranked.items():
                assert exact[node] - score <= share * floor + 1e-12
            assert all(m <= (1.0 + share) * floor + 1e-12 for node, m in exact.items() if node not in ranked)
        assert [e.id for e in state.entities] == exact_top
        assert [c for c, _ in mass.top(10)] == [c for c, _ in exact_mass.top(10)]


def test_an_exact_solver_hands_a_group_larger_than_push_above_to_the_push(store: GraphStore, group: str) -> None:
    ents = typed_corpus(store, group, 4)
    clear_derived()
    seeds = seeds_for(ents, 0)
    exact, stats = run(store, group, seeds, solver="direct", push_above=len(ents), budget=1.0)
    assert stats["solver"] == "direct" and "push_above_entities" not in stats  # at the bound: exact
    pushed, stats = run(store, group, seeds, solver="direct", push_above=len(ents) - 1, push_eps=1e-9,
                        push_tolerance=None, budget=1.0)
    assert stats["solver"] == "push" and stats["push_above_entities"] == len(ents)
    assert str(stats["engine"]).startswith("forward push")
    assert [e.id for e in pushed.entities] == [e.id for e in exact.entities]


def test_the_database_push_stops_reading_a_hub_and_bounds_its_work(store: GraphStore, group: str) -> None:
    """Inside the database a hub the walk barely reaches is read only until its degree puts
    it below its threshold, the ranking is still the exact one, and a call stops at its row
    limit and says so."""
    ents = typed_corpus(store, group, 8)
    hub = "ent:hub"
    store.write(
        group,
        [Node(id=hub, label=Label.ENTITY, group=group, props={"name": "hub"})],
        [Edge(src=f"d{d}:chk{c}", dst=hub, type=EdgeType.MENTIONS, group=group) for d in range(60) for c in range(3)]
        + [Edge(src=hub, dst=e, type=EdgeType.CO_OCCURS, group=group) for e in ents[60:]],
    )
    clear_derived()
    seeds = [Seed(name=e, node_id=e, weight=1.0) for e in (ents[3], ents[8], ents[20])]
    paths = PPR(PPR.Params(**ROUTE5_PATHS)).weights()  # type: ignore[arg-type]
    from graphroute.plugins.expanders.local_ppr import push_in_database

    walk = Paths(**asdict(paths))
    got = push_in_database(store, group, [s.node_id for s in seeds], np.ones(3), walk, damping=0.5, eps=1e-2)
    from graphroute.core.index.stats import group_stats

    if store.backend != "neo4j":
        assert got is None  # the embedded store has no in-database push: the client pushes
        assert group_stats(store, group)["ppr_push"] == "from the client"
        return
    assert group_stats(store, group)["ppr_push"] == "inside the database (graphroute.push)"
    assert got is not None and got.in_database and got.counts_stopped >= 1 and not got.truncated
    exact, _ = run(store, group, seeds, solver="direct", top_k=20, budget=1.0, **ROUTE5_PATHS)
    pushed, stats = run(store, group, seeds, solver="push", push_eps=1e-9, push_tolerance=None, top_k=20, budget=1.0, **ROUTE5_PATHS)
    assert "inside the database" in str(stats["engine"])
    assert [e.id for e in pushed.entities] == [e.id for e in exact.entities]
    def call(max_rows: int) -> dict[str, object]:
        raw = store.push_pagerank(group, [s.node_id for s in seeds], [1.0, 1.0, 1.0], types=walk.edge_types(),
                                  weights={"entity": 1.0, "mentions": 1.0}, damping=0.5, eps=1e-9, drain=1e-3, max_rows=max_rows)
        assert raw is not None
        return dict(raw.stats)

    whole, capped = call(10**9), call(10)
    assert whole["truncated"] is False and capped["truncated"] is True
    assert int(capped["rows_read"]) < int(whole["rows_read"])  # type: ignore[call-overload]


def test_how_far_a_stopped_read_goes_changes_the_work_not_the_scores(store: GraphStore, group: str) -> None:
    """graphroute.push reads a node that cannot be pushed yet only until its degree shows
    that; how far past the threshold it reads (``stop_factor``, 2 by default) decides how
    often a node gaining mass round after round is read again, never what is pushed."""
    if store.backend != "neo4j":
        pytest.skip("only Neo4j runs the push in the server")
    ents = typed_corpus(store, group, 10)
    clear_derived()
    seeds = seeds_for(ents, 1)

    def call(**extra: float) -> tuple[dict[str, float], dict[str, object]]:
        return call_push(store, group, seeds, ROUTE5_PATHS, **extra)

    (every, every_stats), (doubled, doubled_stats), (default, default_stats) = call(stop_factor=1.0), call(stop_factor=2.0), call()
    assert set(every) == set(doubled) and len(every) > 20
    assert max(abs(every[x] - doubled[x]) for x in every) < 1e-12
    assert int(every_stats["counts_stopped"]) > 0  # type: ignore[call-overload]
    assert int(doubled_stats["rows_read"]) < int(every_stats["rows_read"])  # type: ignore[call-overload]
    assert default == doubled and default_stats["rows_read"] == doubled_stats["rows_read"]
    with pytest.raises(Exception, match="stop_factor must be at least 1"):
        call(stop_factor=0.5)


def test_a_hub_looked_up_by_its_counts_changes_the_work_not_the_scores(store: GraphStore, group: str) -> None:
    """A graphroute.push read that has gone through 64 relationships looks its node up by its
    relationship counts per type, and a hub those counts show it cannot push yet is read no
    further. What is pushed, and so every score, is the same as with every such node read
    until it stops."""
    if store.backend != "neo4j":
        pytest.skip("only Neo4j runs the push in the server")
    ents = typed_corpus(store, group, 10, docs=150)
    clear_derived()
    saved: list[int] = []
    for paths, eps in product(({}, ROUTE5_PATHS), (1e-4, 1e-3, 3e-3)):
        for k in range(3):
            seeds = seeds_for(ents, k)
            (looked, looked_stats), (read, read_stats) = (
                call_push(store, group, seeds, paths, eps=eps, typed_degrees=typed) for typed in (True, False)
            )
            assert looked == read, (paths, eps, k)
            assert int(read_stats["degrees_looked_up"]) == 0
            assert int(looked_stats["rows_read"]) <= int(read_stats["rows_read"])  # type: ignore[call-overload]
            saved.append(int(read_stats["rows_read"]) - int(looked_stats["rows_read"]))  # type: ignore[call-overload]
    assert max(saved) > 0, saved  # some hub was not read to its threshold


def test_a_server_push_of_another_version_is_not_used(
    store: GraphStore, group: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The client uses graphroute.push only at the version it knows; otherwise it pushes from
    the client and says so once."""
    if store.backend != "neo4j":
        pytest.skip("only Neo4j runs the push in the server")
    from graphroute.plugins.stores import neo4j_store

    monkeypatch.setattr(store, "_push_procedure", None)  # the store's verdict, restored after the test
    ents = typed_corpus(store, group, 9)
    clear_derived()
    seeds = seeds_for(ents, 0)
    _, stats = run(store, group, seeds, solver="push", push_eps=1e-6, push_tolerance=None, **ROUTE5_PATHS)
    assert "inside the database" in str(stats["engine"])
    monkeypatch.setattr(neo4j_store, "PUSH_PROCEDURE_VERSION", neo4j_store.PUSH_PROCEDURE_VERSION + 1)
    with caplog.at_level("WARNING"):
        state, stats = run(store, group, seeds, solver="push", push_eps=1e-6, push_tolerance=None, **ROUTE5_PATHS)
    assert "reads from the neo4j store" in str(stats["engine"]) and state.entities
    assert any("graphroute.push on this server is version" in r.message for r in caplog.records)


@pytest.mark.parametrize("paths", [{}, ROUTE5_PATHS], ids=["route2-paths", "route5-paths"])
def test_the_server_push_and_the_client_push_rank_alike(store: GraphStore, group: str, paths: dict[str, float]) -> None:
    """graphroute.push walks in rounds as the client push does, so whichever engine runs, a
    bounded push ranks the same entities and chunks in the same order with the same scores
    (a push visiting one node at a time meets the same bound but ranks otherwise)."""
    if store.backend != "neo4j":
        pytest.skip("only Neo4j runs the push in the server")
    ents = typed_corpus(store, group, 5)
    clear_derived()
    for k in range(3):
        seeds = seeds_for(ents, k)
        for eps in (1e-3, 1e-4):
            ranked = {}
            rounds = {}
            for engine in ("auto", "client"):
                state, stats = run(store, group, seeds, solver="push", push_eps=eps, push_tolerance=None, top_k=10,
                                   budget=1.0, push_engine=engine, **paths)
                assert ("inside the database" in str(stats["engine"])) == (engine == "auto")
                assert stats["certified"] is None  # no tolerance asked: nothing certified, and said so
                # the server's own timings reach the trace, the client's push has none
                assert all(float(stats.get(k, 0)) > 0 for k in ("server_ms", "walk_ms")) == (engine == "auto")  # type: ignore[arg-type]
                assert ("server_ms" in stats) == (engine == "auto")
                rounds[engine] = stats["rounds"]
                mass = state.node_scores
                assert isinstance(mass, NodeMass)
                ranked[engine] = ([(e.id, e.score) for e in state.entities], mass.top(10))
            assert rounds["auto"] == rounds["client"] and int(rounds["auto"]) > 0, rounds  # type: ignore[call-overload]
            (server_ents, server_chunks), (client_ents, client_chunks) = ranked["auto"], ranked["client"]
            assert [e for e, _ in server_ents] == [e for e, _ in client_ents], (k, eps)
            assert [c for c, _ in server_chunks] == [c for c, _ in client_chunks], (k, eps)
            for (_, a), (_, b) in zip([*server_ents, *server_chunks], [*client_ents, *client_chunks], strict=True):
                assert a == pytest.approx(b, rel=1e-9)


def test_push_reads_only_what_its_seeds_reach(store: GraphStore, group: str) -> None:
    """Two disconnected corpora in one group: a walk from one never reads the other, and
    reads less of its own the larger its eps; chunks are ranked by mass without the group's
    chunk list."""
    ents = typed_corpus(store, group, 5, prefix="a")
    typed_corpus(store, group, 6, prefix="b", docs=150)
    seeds = [Seed(name=e, node_id=e, weight=1.0) for e in (ents[3], ents[8], ents[20])]
    touched = []
    for eps in (1e-3, 1e-5, 1e-8):
        state, stats = run(store, group, seeds, solver="push", push_eps=eps, push_tolerance=None, **ROUTE5_PATHS)
        assert stats["nodes_touched"] and all(not e.id.startswith("ent:b") for e in state.entities)
        mass = state.node_scores
        assert not any(node.startswith("b") for node in mass)
        touched.append(int(stats["nodes_touched"]))
        passages = StageContext(services=Services(store, group), stage_id="ppr_passages")
        PPRPassages(PPRPassages.Params(top_k=5)).run(state, passages)
        assert state.evidence and all(ev.kind == "chunk" and ev.id.startswith("ad") for ev in state.evidence)
        assert [ev.score for ev in state.evidence] == sorted((ev.score for ev in state.evidence), reverse=True)
    assert touched[0] < touched[1] <= touched[2] < 60 * 3 + 60 + 120 + 1


def test_entity_chunks_read_per_entity_match_a_scan(store: GraphStore, group: str) -> None:
    """entity_chunks reads each kept entity's chunks from the store, only its first documents'
    when in reading order: the same chunks, in the same order, as sorting every mention of a
    whole-group scan - with chunk indexes past 9 (chk10 after chk2), hubs over many
    documents, mentions from sentences and ties in mass."""
    rng = np.random.default_rng(4)
    ents = [f"ent:h{i}" for i in range(6)]
    nodes = [Node(id=e, label=Label.ENTITY, group=group) for e in ents]
    edges = []
    for d in range(30):
        for c in range(int(rng.integers(1, 14))):
            cid = f"doc{d:02d}:chk{c}"
            nodes.append(Node(id=cid, label=Label.CHUNK, group=group, doc_id=f"doc{d:02d}", props={"index": c}))
            for e in rng.choice(ents, int(rng.integers(0, 4)), replace=False):
                edges.append(Edge(src=cid, dst=str(e), type=EdgeType.MENTIONS, group=group))
                sid = f"{cid}/s"
                nodes.append(Node(id=sid, label=Label.SENTENCE, group=group, doc_id=f"doc{d:02d}"))
                edges.append(Edge(src=sid, dst=str(e), type=EdgeType.MENTIONS, group=group))
    store.write(group, nodes, edges)
    chunks = {n.id: n for n in store.iter_nodes(group, Label.CHUNK)}
    mass = {c: float(rng.choice([0.0, 0.1, 0.2, 0.3])) for c in chunks}
    for limit in (1, 5, 12, 500):
        for m in (None, mass):
            got, read = chunks_in_order(store, group, ents, limit, m)
            for e in ents:
                mentioning = [chunks[x.src] for x in store.iter_edges(group, [EdgeType.MENTIONS]) if x.dst == e and x.src in chunks]
                weight = m or {}
                ranked = sorted(mentioning, key=lambda nd, w=weight: (-w.get(nd.id, 0.0), chunk_order(nd)))  # type: ignore[misc]
                want = [nd.id for nd in ranked[:limit]]
                assert got[e] == want, (e, limit, m is not None)
                assert set(got[e]) <= set(read)
            if m is None and limit < 13:  # the first documents only: not every chunk is read
                assert len(read) < len(chunks)


def test_push_stops_counting_a_hub_it_will_not_push(store: GraphStore, group: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A hub the walk barely reaches is counted only until its degree is shown above its
    push threshold (on a backend that can stop a count), and the push ranks exactly as with
    every degree counted whole."""
    from graphroute.plugins.expanders import local_ppr

    ents = typed_corpus(store, group, 7)
    hub = "ent:hub"
    nodes = [Node(id=hub, label=Label.ENTITY, group=group, props={"name": "hub"})]
    edges = [Edge(src=f"d{d}:chk{c}", dst=hub, type=EdgeType.MENTIONS, group=group) for d in range(60) for c in range(3)]
    edges += [Edge(src=hub, dst=e, type=EdgeType.CO_OCCURS, group=group) for e in ents[60:]]
    store.write(group, nodes, edges)
    clear_derived()
    seeds = [Seed(name=e, node_id=e, weight=1.0) for e in (ents[3], ents[8], ents[20])]

    def push() -> tuple[list[tuple[str, float]], dict[str, object]]:
        local_ppr._DEGREES._tables.clear()
        state, stats = run(store, group, seeds, solver="push", push_eps=1e-2, push_tolerance=None, top_k=20, budget=1.0,
                           push_engine="client", **ROUTE5_PATHS)
        assert isinstance(state.node_scores, NodeMass)
        return [(e.id, e.score) for e in state.entities] + list(state.node_scores.top(20)), stats

    counted_whole: list[str] = []
    count = store.neighbour_counts

    def counting(group: str, ids: list[str], types: list[str], **kw: object) -> object:
        if kw.get("limit") is None:
            counted_whole.extend(ids)
        return count(group, ids, types, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(store, "neighbour_counts", counting)
    # the walk's own counts: the remainder's spread counts its few best nodes whole (cached)
    monkeypatch.setattr(store, "type_totals", lambda *a, **kw: None)
    stopped, _ = push()
    assert hub not in counted_whole
    # every degree counted whole: no limits, no type degrees, no far ends' degrees in reads
    monkeypatch.setattr(local_ppr, "COUNT_LIMITS", ())
    monkeypatch.setattr(store, "type_degrees", lambda *a, **kw: None)
    read = store.neighbours
    monkeypatch.setattr(store, "neighbours", lambda g, ids, types, **kw: read(g, ids, types, **{**kw, "far_types": None}))
    whole, whole_stats = push()
    assert stopped == whole
    assert whole_stats["counts_stopped"] == 0
    assert hub in counted_whole


def test_type_degrees_decide_a_far_end_only_where_the_label_does() -> None:
    """A chunk's MENTIONS lead to entities, so its type degrees are its degree; an entity's
    MENTIONS may come from sentences, so its degree is only bounded by its other types."""
    from graphroute.core.api.neighbourhood import TypeDegrees
    from graphroute.plugins.expanders.local_ppr import decided_degrees

    types = (EdgeType.CO_OCCURS, EdgeType.IN_SECTION, EdgeType.MENTIONS)
    typed = TypeDegrees(
        types,
        ["c", "e", "s", "lone"],
        [Label.CHUNK, Label.ENTITY, Label.SENTENCE, Label.ENTITY],
        np.array([[0, 1, 3], [7, 0, 40], [0, 0, 2], [0, 0, 0]]),
    )
    paths = Paths(entity=0.5, section=0.0, similar=0.0, shares=0.0, hub=0.0, mentions=2.0)
    deg, whole = decided_degrees(typed, paths)
    # c: 3 MENTIONS + 1 IN_SECTION at weight 2; e: 7 CO_OCCURS at 0.5, MENTIONS undecided
    np.testing.assert_allclose(deg, [8.0, 3.5, 0.0, 0.0])
    assert whole.tolist() == [True, False, False, True]


@pytest.mark.parametrize("paths", [{}, ROUTE5_PATHS], ids=["route2-paths", "route5-paths"])
def test_the_graph_volume_from_type_totals_is_the_typed_graphs(store: GraphStore, group: str, paths: dict[str, float]) -> None:
    """The volume counted per label and type in the store (sentences' mentions of entities
    left out by counting MENTIONS at the chunks) is the sum of the exact solver's weighted
    degrees; the totals are the nodes' type degrees summed."""
    from graphroute.plugins.expanders import local_ppr
    from graphroute.plugins.expanders.local_ppr import graph_volume, node_degrees, volume

    ents = typed_corpus(store, group, 7)
    # one entity more often in sentences than its chunks' share: its mentions tell its degree less well
    talked_of = ents[5]
    store.write(group, [Node(id=f"x{i}", label=Label.SENTENCE, group=group) for i in range(40)],
                [Edge(src=f"x{i}", dst=talked_of, type=EdgeType.MENTIONS, group=group) for i in range(40)])
    clear_derived()
    weights = PPR(PPR.Params(**paths)).weights()  # type: ignore[arg-type]
    walk = Paths(**asdict(weights))
    totals = store.type_totals(group, walk.edge_types(), [Label.ENTITY, Label.CHUNK, Label.SECTION, Label.SENTENCE])
    assert totals is not None and set(totals.labels) == {Label.ENTITY, Label.CHUNK, Label.SECTION, Label.SENTENCE}
    # each label's totals: every edge end of each type at its nodes, whatever the other end
    ends: dict[tuple[str, str], int] = {}
    for e in store.iter_edges(group, walk.edge_types()):
        for end in (e.src, e.dst):
            label = store.get_nodes(group, [end])[0].label
            ends[(str(label), str(e.type))] = ends.get((str(label), str(e.type)), 0) + 1
    for i, label in enumerate(totals.labels):
        for j, t in enumerate(totals.types):
            assert int(totals.counts[i, j]) == ends.get((label, t), 0), (label, t)
    walked = store.type_totals(group, walk.edge_types(), [Label.ENTITY, Label.CHUNK])
    assert walked is not None and sorted(walked.labels) == sorted([Label.ENTITY, Label.CHUNK])
    keep = [totals.labels.index(lb) for lb in walked.labels]
    np.testing.assert_array_equal(walked.counts, totals.counts[keep])
    g = typed_graph(store, group, weights)
    assert volume(totals, walk) == pytest.approx(float(g.adjacency.sum()), rel=1e-12)
    assert graph_volume(store, group, walk) == pytest.approx(float(g.adjacency.sum()), rel=1e-12)
    # the spread's degrees: a chunk's exact (type degrees on Neo4j, counted on the embedded
    # store); an entity's exact where counted, else its mentions at the group's chunk share,
    # which over every entity adds up to the exact total
    local_ppr._DEGREES._tables.clear()
    exact = np.asarray(g.adjacency.sum(axis=0)).ravel()
    entities, chunks = [x for x in g.ids if x.startswith("ent:")], [x for x in g.ids if ":chk" in x]
    np.testing.assert_allclose(node_degrees(store, group, [*chunks, "ent:not-a-node"], walk), [*(exact[g.index[x]] for x in chunks), 0.0])
    spread_deg = node_degrees(store, group, entities, walk)
    exact_deg = np.array([exact[g.index[x]] for x in entities])
    assert spread_deg.sum() == pytest.approx(exact_deg.sum(), rel=1e-9)
    if store.type_degrees(group, entities[:1], walk.edge_types()) is None:
        np.testing.assert_allclose(spread_deg, exact_deg)
    else:
        over = entities.index(talked_of)
        assert spread_deg[over] > exact_deg[over]
        assert np.corrcoef(spread_deg, exact_deg)[0, 1] > 0.9


@pytest.mark.parametrize("engine", ["auto", "client"])
def test_the_remainders_spread_brings_a_coarse_push_nearer_the_exact_scores(
    store: GraphStore, group: str, engine: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """At a coarse eps the push leaves mass unpushed; spread by degree over the best
    entities and chunks it moves their scores nearer the exact solve's (a hub most), and
    without a graph volume nothing is spread."""

    ents = typed_corpus(store, group, 3)
    clear_derived()
    seeds = seeds_for(ents, 1)
    exact, _ = run(store, group, seeds, solver="direct", top_k=30, budget=1.0, **ROUTE5_PATHS)
    exact_ent = {e.id: e.score for e in exact.entities}

    def push(remainder: str = "degree") -> tuple[dict[str, float], dict[str, object]]:
        state, stats = run(store, group, seeds, solver="push", push_eps=1e-3, push_tolerance=None, top_k=30, budget=1.0,
                           push_engine=engine, push_remainder=remainder, **ROUTE5_PATHS)
        return {e.id: e.score for e in state.entities}, stats

    spread, stats = push()
    assert stats["remainder_spread_to"] and float(stats["graph_volume"]) > 0  # type: ignore[arg-type]
    assert float(stats["l1_error_bound"]) > 0.01  # type: ignore[arg-type]  # a coarse push: much is left
    plain, plain_stats = push("none")
    assert plain_stats["remainder_spread_to"] == 0 and plain_stats["graph_volume"] is None
    monkeypatch.setattr(store, "type_totals", lambda *a, **k: None)  # a store that cannot count its volume
    clear_derived()
    unable, unable_stats = push()
    assert unable == plain and unable_stats["remainder_spread_to"] == 0 and unable_stats["graph_volume"] is None

    def error(scores: dict[str, float]) -> float:
        return sum(abs(exact_ent[e] - scores.get(e, 0.0)) for e in exact_ent)

    assert error(spread) < 0.8 * error(plain)
    hub = max(exact_ent, key=exact_ent.__getitem__)
    assert abs(exact_ent[hub] - spread[hub]) <= abs(exact_ent[hub] - plain[hub])
    exact_top = [e.id for e in exact.entities[:10]]
    assert len(set(exact_top) & set(list(spread)[:10])) >= len(set(exact_top) & set(list(plain)[:10]))


@pytest.mark.parametrize("pool", [3, 100])
def test_the_procedure_spreads_the_remainder_as_the_client_does(
    store: GraphStore, group: str, pool: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With ``spread``, graphroute.push adds the remainder's share to the same nodes (the
    pool's best entities and chunks, ties at its edge included) by the same degrees
    (an entity mentioned by sentences at the group's chunk share) as the client's
    spread_remainder on the procedure's unspread scores: one round trip, the same ranking."""
    if not store.pushes_in_database():
        pytest.skip("the store has no in-database push")
    from graphroute.plugins.expanders import local_ppr
    from graphroute.plugins.expanders.local_ppr import push_in_database, spread_remainder

    monkeypatch.setattr(local_ppr, "SPREAD_POOL", pool)
    ents = typed_corpus(store, group, 5)
    talked_of = ents[4]  # mentioned by sentences too: its degree is estimated, not counted
    store.write(group, [Node(id=f"x{i}", label=Label.SENTENCE, group=group) for i in range(30)],
                [Edge(src=f"x{i}", dst=talked_of, type=EdgeType.MENTIONS, group=group) for i in range(30)])
    clear_derived()
    walk = Paths(**asdict(PPR(PPR.Params(**ROUTE5_PATHS)).weights()))  # type: ignore[arg-type]
    seeds = [talked_of, ents[9], ents[17]]
    weights = np.array([1.0, 0.5, 0.25])
    plain = push_in_database(store, group, seeds, weights, walk, damping=0.84, eps=1e-3)
    spread = push_in_database(store, group, seeds, weights, walk, damping=0.84, eps=1e-3, spread=True)
    assert plain is not None and spread is not None and plain.spread_to == 0
    client = spread_remainder(store, group, plain, walk)
    assert spread.ids == client.ids and spread.spread_to == client.spread_to
    ents_n, chunks_n = (sum(lb == label for lb in plain.labels) for label in (Label.ENTITY, Label.CHUNK))
    assert min(pool, ents_n) + min(pool, chunks_n) <= spread.spread_to <= ents_n + chunks_n
    if pool == 3:
        assert spread.spread_to < ents_n + chunks_n  # a pool smaller than the touched nodes
    assert spread.volume == pytest.approx(client.volume, rel=1e-12)
    np.testing.assert_allclose(spread.scores, client.scores, rtol=1e-12, atol=0)
    assert spread.scores[spread.ids.index(talked_of)] > plain.scores[plain.ids.index(talked_of)]
