"""The store fixture every conformance test runs against: once per backend.

The ``neo4j`` parameter connects to the project's server (``make neo4j-up``; NEO4J_URI,
default bolt://127.0.0.1 on $NEO4J_PORT, the port ``make neo4j-up`` uses, 7687 when unset).
When it is unreachable the Neo4j cases are skipped, except in CI (``CI=true``) where they
must run, so they fail instead.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest
from graphroute.core.api.constants import NEO4J_DEV_PASSWORD as DEV_PASSWORD
from graphroute.core.api.store import GraphStore
from graphroute.core.config.settings import Settings
from graphroute.core.engine import open_store
from graphroute.core.errors import StoreError

from tests.dev_neo4j import NEO4J_URI

BACKENDS = ["embedded", "neo4j"]


def neo4j_settings() -> Settings:
    settings = Settings()
    if not settings.neo4j_password:
        settings.neo4j_password = DEV_PASSWORD
    return settings


_neo4j_error: list[str] = []


def open_backend(backend: str, tmp_path_factory: pytest.TempPathFactory) -> GraphStore:
    """Open a store of ``backend``; skip (or fail in CI) when Neo4j is not reachable."""
    if backend == "embedded":
        return open_store(str(tmp_path_factory.mktemp("store")), settings=Settings())
    if _neo4j_error and os.environ.get("CI") != "true":
        pytest.skip(_neo4j_error[0])
    try:
        return open_store(NEO4J_URI, settings=neo4j_settings())
    except StoreError as exc:
        if os.environ.get("CI") == "true":
            raise
        _neo4j_error.append(f"Neo4j not reachable ({exc}); run `make neo4j-up`")
        pytest.skip(_neo4j_error[0])


@pytest.fixture(scope="session", params=BACKENDS)
def session_store(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[GraphStore]:
    store = open_backend(request.param, tmp_path_factory)
    yield store
    store.close()


@pytest.fixture
def store(session_store: GraphStore) -> GraphStore:
    return session_store


@pytest.fixture
def group(store: GraphStore) -> Iterator[str]:
    """A fresh group per test (with characters that must survive as data), deleted after."""
    name = f"conf-{uuid.uuid4().hex[:10]}"
    yield name
    store.delete_group(name)


@pytest.fixture
def make_group(store: GraphStore) -> Iterator[object]:
    """Factory for extra groups in one test; all are deleted afterwards."""
    made: list[str] = []

    def make(suffix: str = "") -> str:
        name = f"conf-{uuid.uuid4().hex[:10]}{suffix}"
        made.append(name)
        return name

    yield make
    for name in made:
        store.delete_group(name)
