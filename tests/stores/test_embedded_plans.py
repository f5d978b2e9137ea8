"""The embedded store looks edges up by their endpoint's index: a lookup of a few ids must
not read every edge of the group (or of a type), however the planner would guess."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from graphroute.core.api.models import Edge, EdgeType, Label, Node
from graphroute.plugins.stores.embedded import EmbeddedStore


def test_endpoint_lookups_search_an_index_in_both_directions(tmp_path: Path) -> None:
    store = EmbeddedStore(str(tmp_path / "s"))
    nodes = [Node(id=f"e{i}", label=Label.ENTITY, group="g") for i in range(50)]
    nodes += [Node(id=f"c{i}", label=Label.CHUNK, group="g", doc_id=f"d{i}") for i in range(20)]
    edges = [Edge(src=f"c{i % 20}", dst=f"e{i}", type=EdgeType.MENTIONS, group="g") for i in range(50)]
    edges += [Edge(src=f"e{i}", dst=f"e{(i * 7) % 50}", type=EdgeType.CO_OCCURS, group="g") for i in range(50)]
    store.write("g", nodes, edges)
    traced: list[str] = []
    conn = store._conn()
    conn.set_trace_callback(traced.append)
    nb = store.neighbours("g", ["e1", "e2"], [EdgeType.MENTIONS], other_labels=[Label.CHUNK])
    assert sorted(zip(nb.node, nb.other, strict=True)) == [("e1", "c1"), ("e2", "c2")]
    store.neighbour_counts("g", ["e1", "e2"], [EdgeType.MENTIONS, EdgeType.CO_OCCURS])
    incoming = store.edges_of("g", ["e3"], [EdgeType.MENTIONS], direction="in")
    assert [(e.src, e.dst) for e in incoming] == [("c3", "e3")]
    conn.set_trace_callback(None)
    reads = [sql for sql in traced if "FROM edges" in sql and "IN (" in sql]
    assert len(reads) == 3
    plans = sqlite3.connect(str(tmp_path / "s" / "graph.sqlite"))
    for sql in reads:
        steps = [row[3] for row in plans.execute("EXPLAIN QUERY PLAN " + sql)]
        edge_steps = [s for s in steps if s.split()[:2] in (["SEARCH", "e"], ["SCAN", "e"], ["SEARCH", "edges"], ["SCAN", "edges"])]
        # both directions of a lookup search the index that starts with the asked endpoint
        assert len(edge_steps) in (1, 2), steps
        assert all(s.startswith("SEARCH") and ("src=?" in s or "dst=?" in s) for s in edge_steps), steps
    store.close()
