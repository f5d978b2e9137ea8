"""Fixtures for Route 2 tests: a real embedded store holding a small hand-made graph."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from graphroute.core.api.models import Edge, EdgeType, Label, Node
from graphroute.core.api.stage import StageContext
from graphroute.core.api.store import GraphStore
from graphroute.core.engine import open_store
from graphroute.core.query.services import Services

GROUP = "g"


def ent(norm: str, community: int | None = None, mentions: int = 1, aliases: list[str] | None = None, name: str | None = None) -> Node:
    props: dict[str, object] = {"name": name or norm.title(), "norm": norm, "mention_count": mentions, "aliases": aliases or [name or norm.title()]}
    if community is not None:
        props["community"] = community
    return Node(id=f"ent:{norm}", label=Label.ENTITY, group=GROUP, props=props)


def rel(a: str, b: str, t: str = EdgeType.RELATION) -> Edge:
    return Edge(src=f"ent:{a}", dst=f"ent:{b}", type=t, group=GROUP)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[GraphStore]:
    s = open_store(str(tmp_path / "store"))
    yield s
    s.close()


def chain_graph(store: GraphStore) -> None:
    """a - b - c - d - e (a path) plus an isolated pair x - y."""
    names = ["a", "b", "c", "d", "e", "x", "y"]
    store.write(
        GROUP,
        nodes=[ent(n, community=0 if n in "abcde" else 1) for n in names],
        edges=[rel("a", "b"), rel("b", "c"), rel("c", "d"), rel("d", "e"), rel("x", "y", EdgeType.CO_OCCURS)],
    )


def unit_vectors(n: int, dim: int = 8, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    v = rng.normal(size=(n, dim)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def context(store: GraphStore) -> StageContext:
    return StageContext(services=Services(store, GROUP), stage_id="t")
