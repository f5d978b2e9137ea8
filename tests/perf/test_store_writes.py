"""The embedded store's faster write path keeps its rules: rows whose endpoints are nodes
of the same write skip the existence check, the others are still checked (kept when the
node was written before, skipped when it does not exist); a store created with the older
WITHOUT ROWID vectors table keeps working."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np
from graphroute.core.api.models import Edge, EdgeType, Label, Node
from graphroute.core.engine import open_store
from graphroute.plugins.stores import embedded


def _unit(n: int, seed: int = 0) -> np.ndarray:
    m = np.random.default_rng(seed).standard_normal((n, 8)).astype(np.float32)
    return m / np.linalg.norm(m, axis=1, keepdims=True)


def _exercise(location: Path) -> None:
    store = open_store(str(location))
    try:
        g = "g"
        store.write(g, [Node(id="old", label=Label.SENTENCE, group=g)])
        nodes = [Node(id=f"n{i}", label=Label.SENTENCE, group=g) for i in range(3)]
        edges = [
            Edge(src="n0", dst="n1", type=EdgeType.NEXT, group=g),  # both in this write
            Edge(src="n2", dst="old", type=EdgeType.NEXT, group=g),  # one end written before
            Edge(src="n1", dst="ghost", type=EdgeType.NEXT, group=g),  # one end nowhere
            Edge(src="n0", dst="n1", type=EdgeType.NEXT, group=g, props={"w": 2}),  # same key: last wins
        ]
        vecs = _unit(5)
        store.write(g, nodes, edges, {"sentence": (["n0", "n1", "n2", "old", "ghost"], vecs)})
        got = {(e.src, e.dst): e.props for e in store.iter_edges(g)}
        assert got == {("n0", "n1"): {"w": 2}, ("n2", "old"): {}}
        ids, mat = store.all_vectors(g, "sentence")
        assert ids == ["n0", "n1", "n2", "old"]
        np.testing.assert_array_equal(mat, vecs[:4])
        # rewriting vectors replaces them (the unique key holds on either table layout)
        store.write(g, vectors={"sentence": (["n1"], vecs[4:5])})
        assert store.vector_search(g, "sentence", vecs[4], 1)[0][0] == "n1"
        assert store.counts(g)["vectors"] == {"sentence": 4}
    finally:
        store.close()


def test_write_rules_on_a_new_store(tmp_path: Path) -> None:
    _exercise(tmp_path / "new")
    con = sqlite3.connect(tmp_path / "new" / embedded.DB_FILE)
    sql = con.execute("SELECT sql FROM sqlite_master WHERE name = 'vectors'").fetchone()[0]
    con.close()
    assert "WITHOUT ROWID" not in sql


def test_write_rules_on_a_store_with_the_older_vectors_table(tmp_path: Path) -> None:
    old = embedded._SCHEMA.replace(
        "UNIQUE (grp, space, id)\n);", "PRIMARY KEY (grp, space, id)\n) WITHOUT ROWID;"
    )
    assert old != embedded._SCHEMA
    (tmp_path / "old").mkdir()
    con = sqlite3.connect(tmp_path / "old" / embedded.DB_FILE)
    con.executescript(old)
    con.close()
    _exercise(tmp_path / "old")
