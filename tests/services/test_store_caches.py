"""Derived-structure caches (graph exports, lexicons, per-version structures) belong to one
store object: a store opened after another one closed must never see the old one's data,
even when Python reuses the closed object's id and both groups are at the same version."""

from __future__ import annotations

import gc
from pathlib import Path

from graphroute.core.api.models import Edge, EdgeType, Label, Node
from graphroute.core.api.store import (
    GraphStore,
    cache_token,
    one_version_per_question,
    per_version,
    read_version,
)
from graphroute.core.engine import open_store
from graphroute.core.lib.graph import adjacency


def _write_pair(path: Path, a: str, b: str) -> GraphStore:
    store = open_store(str(path))
    store.write("g", nodes=[Node(id=a, label=Label.ENTITY, group="g"), Node(id=b, label=Label.ENTITY, group="g")],
                edges=[Edge(src=a, dst=b, type=EdgeType.RELATION, group="g")])
    return store


def test_each_store_object_has_its_own_token(tmp_path: Path) -> None:
    one = open_store(str(tmp_path / "one"))
    two = open_store(str(tmp_path / "two"))
    assert cache_token(one) == cache_token(one) != cache_token(two)
    one.close()
    two.close()


def test_a_store_opened_after_another_sees_only_its_own_graph(tmp_path: Path) -> None:
    seen: list[tuple[str, ...]] = []
    for i, (a, b) in enumerate([("ent:a", "ent:b"), ("ent:x", "ent:y"), ("ent:p", "ent:q")]):
        store = _write_pair(tmp_path / f"s{i}", a, b)
        view = adjacency(store, "g", {EdgeType.RELATION: 1.0})
        names = per_version(store, "g", "names", lambda s=store: tuple(n.id for n in s.iter_nodes("g", Label.ENTITY)))
        assert view.ids == names == (a, b)
        seen.append(view.ids)
        store.close()
        del store, view
        gc.collect()  # free the object so the next store may get its id
    assert len(set(seen)) == 3


def test_a_question_keys_derived_structures_on_the_version_it_read_first(tmp_path: Path) -> None:
    store = _write_pair(tmp_path / "s", "ent:a", "ent:b")

    def names() -> tuple[str, ...]:
        return per_version(store, "g", "names", lambda: tuple(n.id for n in store.iter_nodes("g", Label.ENTITY)))

    with one_version_per_question():
        before = read_version(store, "g")
        assert names() == ("ent:a", "ent:b")
        store.write("g", nodes=[Node(id="ent:c", label=Label.ENTITY, group="g")])
        assert store.version("g") != before
        assert read_version(store, "g") == before  # the question goes on with one version
        assert names() == ("ent:a", "ent:b")
    assert read_version(store, "g") == store.version("g") != before
    assert names() == ("ent:a", "ent:b", "ent:c")  # the next question sees the write
    store.close()
