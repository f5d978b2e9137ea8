"""Neo4j backend: clear errors for an unreachable server and wrong credentials, and the
large-group vector path (index query + group filter + exact fallback) on the real server."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from graphroute.core.api.models import Label, Node, VectorSpace
from graphroute.core.api.store import GraphStore
from graphroute.core.config.settings import Settings
from graphroute.core.engine import open_store
from graphroute.core.errors import StoreError
from graphroute.plugins.stores.neo4j_store import Neo4jBackend, Neo4jStore

from tests.dev_neo4j import NEO4J_URI, needs_server

PASSWORD = os.environ.get("NEO4J_PASSWORD") or "graphroute-dev"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_unreachable_server_is_a_clear_store_error() -> None:
    uri = f"bolt://127.0.0.1:{free_port()}"
    t0 = time.monotonic()
    with pytest.raises(StoreError) as err:
        open_store(uri, settings=Settings(neo4j_password="s3cret-not-shown"))
    message = str(err.value)
    assert uri in message and "unreachable" in message
    assert "s3cret-not-shown" not in message
    assert time.monotonic() - t0 < 60  # gives up after its bounded retries


def test_uri_credentials_never_appear_in_messages() -> None:
    port = free_port()
    with pytest.raises(StoreError) as err:
        Neo4jBackend(Neo4jBackend.Params(connect_attempts=1)).open(
            f"neo4j://neo4j:hunter22@127.0.0.1:{port}", settings=Settings(neo4j_password="x")
        )
    assert "hunter22" not in str(err.value) and f"127.0.0.1:{port}" in str(err.value)


def test_a_routing_uri_to_a_server_that_is_down_says_why_and_nothing_else() -> None:
    # neo4j:// wraps each address's failure under "Unable to retrieve routing information",
    # which the driver also logs at ERROR on every attempt: the command shows one message,
    # with the wrapped reason and what to check
    uri = f"neo4j://127.0.0.1:{free_port()}"
    env = {**os.environ, "GRAPHROUTE_STORE_PARAMS": json.dumps({"neo4j": {"connect_attempts": 2}})}
    r = subprocess.run(
        [str(Path(sys.executable).with_name("graphroute")), "stats", "--group", "g", "--store", uri],
        capture_output=True, text=True, env=env, timeout=120,
    )
    assert r.returncode == 3, (r.returncode, r.stderr)
    assert "Unable to retrieve routing information" not in r.stderr, r.stderr
    assert r.stderr.startswith("error: ") and r.stderr.count("error: ") == 1, r.stderr
    assert uri in r.stderr and "Connection refused" in r.stderr
    assert "--store" in r.stderr and "NEO4J_URI" in r.stderr


class _NotBolt:
    """A loopback TCP server that is not Neo4j: it answers every connection with an HTTP
    error (``reply``), or takes it and never answers (an HTTP server waiting for a request line)."""

    def __init__(self, reply: bytes | None) -> None:
        self.reply = reply
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self.listener.getsockname()[1])
        self.held: list[socket.socket] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            if self.reply is None:
                self.held.append(conn)  # kept open, never answered
                continue
            conn.recv(64)
            conn.sendall(self.reply)
            conn.close()

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.listener.shutdown(socket.SHUT_RDWR)
        self.listener.close()
        for conn in self.held:
            conn.close()


@pytest.mark.parametrize("reply", [b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n", None], ids=["http", "silent"])
def test_an_address_that_is_not_bolt_says_so_without_retrying(reply: bytes | None) -> None:
    # the Neo4j browser's HTTP port where the Bolt one belongs: a location to fix (exit 2),
    # said at the first attempt; a port that never answers the handshake held each of the
    # three attempts for the driver's 60 s
    server = _NotBolt(reply)
    uri = f"bolt://127.0.0.1:{server.port}"
    t0 = time.monotonic()
    try:
        with pytest.raises(StoreError) as err:
            open_store(uri, settings=Settings(neo4j_password="x"))
    finally:
        server.close()
    message = str(err.value)
    assert err.value.exit_code == 2, message
    assert "does not answer Neo4j's Bolt protocol" in message and uri in message and "7687" in message
    assert time.monotonic() - t0 < 40


def test_unknown_scheme_is_not_neo4j() -> None:
    assert Neo4jBackend.handles("bolt://h:7687") and Neo4jBackend.handles("neo4j+s://h")
    assert not Neo4jBackend.handles("/tmp/store") and not Neo4jBackend.handles("http://h")


@needs_server
def test_wrong_password_is_a_clear_store_error() -> None:
    with pytest.raises(StoreError) as err:
        open_store(NEO4J_URI, settings=Settings(neo4j_user="neo4j", neo4j_password="definitely-wrong-pw"))
    message = str(err.value)
    assert "credentials" in message and NEO4J_URI in message
    assert "definitely-wrong-pw" not in message
    assert err.value.exit_code == 3  # a store that refuses us, as StoreUnavailableError says


@needs_server
def test_a_database_the_server_lacks_is_the_users_to_fix() -> None:
    # the `database` store parameter naming a database the server has not got (a Community
    # server has one): exit 2 and what to set, not the driver's DatabaseNotFound as exit 1
    settings = Settings(neo4j_password=PASSWORD, store_params={"neo4j": {"database": "nosuchdb"}})
    with pytest.raises(StoreError) as err:
        open_store(NEO4J_URI, settings=settings)
    message = str(err.value)
    assert "no database 'nosuchdb'" in message and "GRAPHROUTE_STORE_PARAMS" in message, message
    assert err.value.exit_code == 2


@needs_server
def test_a_wrong_password_in_the_uri_is_named_as_the_one_to_fix() -> None:
    # the URI's password wins over NEO4J_PASSWORD: telling the user to set that variable
    # (here already right) would change nothing
    scheme, rest = NEO4J_URI.split("://", 1)
    with pytest.raises(StoreError) as err:
        open_store(f"{scheme}://neo4j:wrong-in-uri@{rest}", settings=Settings(neo4j_password=PASSWORD))
    message = str(err.value)
    assert "user:password in the store URI" in message and "wrong-in-uri" not in message
    assert err.value.exit_code == 3


def test_a_malformed_location_is_the_users_to_fix() -> None:
    with pytest.raises(StoreError) as err:
        open_store("bolt://127.0.0.1:notaport", settings=Settings(neo4j_password="x"))
    assert "invalid Neo4j location" in str(err.value) and err.value.exit_code == 2


@pytest.fixture
def index_store() -> Iterator[GraphStore]:
    """A store that never takes the exact path for whole groups: exercises the index."""
    store = Neo4jBackend(Neo4jBackend.Params(exact_max=0, oversample=2)).open(
        NEO4J_URI, settings=Settings(neo4j_password=PASSWORD)
    )
    yield store
    store.close()


@needs_server
def test_index_path_keeps_k_hits_for_a_crowded_small_group(index_store: GraphStore) -> None:
    assert isinstance(index_store, Neo4jStore)
    big, small = f"idx-big-{uuid.uuid4().hex[:8]}", f"idx-small-{uuid.uuid4().hex[:8]}"
    rng = np.random.default_rng(0)
    dim = 24
    q = rng.normal(size=dim).astype(np.float32)
    q /= np.linalg.norm(q)
    near = q + 0.05 * rng.normal(size=(1500, dim)).astype(np.float32)
    near /= np.linalg.norm(near, axis=1, keepdims=True)
    rand = rng.normal(size=(12, dim)).astype(np.float32)
    rand /= np.linalg.norm(rand, axis=1, keepdims=True)
    try:
        big_ids = [f"b{i}" for i in range(len(near))]
        index_store.write(big, [Node(id=i, label=Label.CHUNK, group=big) for i in big_ids],
                          vectors={VectorSpace.CHUNK: (big_ids, near)})
        small_ids = [f"s{i}" for i in range(len(rand))]
        index_store.write(small, [Node(id=i, label=Label.CHUNK, group=small) for i in small_ids],
                          vectors={VectorSpace.CHUNK: (small_ids, rand)})
        # the index's nearest candidates are all of the big group: the fallback must answer
        hits = index_store.vector_search(small, VectorSpace.CHUNK, q, 5)
        assert index_store.last_search_path == "index+exact"
        assert [h[0] for h in hits] == [small_ids[j] for j in np.argsort(-(rand @ q))[:5]]
        np.testing.assert_allclose([h[1] for h in hits], np.sort(rand @ q)[::-1][:5], atol=1e-5)
        # the big group itself is answered by the index (approximate, but near-exact here)
        hits = index_store.vector_search(big, VectorSpace.CHUNK, q, 10)
        assert index_store.last_search_path == "index"
        exact = {big_ids[j] for j in np.argsort(-(near @ q))[:10]}
        assert len(hits) == 10 and len(exact & {h[0] for h in hits}) >= 8
        # the statement that answers if the index ever yields out of order keeps the same hits
        from graphroute.plugins.stores.neo4j_store import _BEST_FIRST, _SORTED

        prop, qv = "vec_chunk_24", [float(x) for x in q]
        best_first = index_store._vector_rows(_BEST_FIRST, prop, qv, big, 40, 10)
        assert len(best_first) == 10
        assert [r["id"] for r in best_first] == [r["id"] for r in index_store._vector_rows(_SORTED, prop, qv, big, 40, 10)]
        assert [r["score"] for r in best_first] == sorted((r["score"] for r in best_first), reverse=True)
        # the same vector again with a smaller k: the first hits of that search, not another
        sent: list[str] = []
        real_rows = index_store._rows

        def rows(what: str, *args: object, **kw: object) -> list[dict[str, object]]:
            sent.append(what)
            return real_rows(what, *args, **kw)  # type: ignore[arg-type]

        index_store._rows = rows  # type: ignore[method-assign]
        try:
            assert index_store.vector_search(big, VectorSpace.CHUNK, q, 4) == hits[:4]
            assert sent == []
            index_store.vector_search(big, VectorSpace.CHUNK, q, 20)  # more than it holds: asked
            index_store.vector_search(big, VectorSpace.CHUNK, near[5], 4)  # another vector: asked
            assert sent == ["vector index search", "vector index search"]
        finally:
            del index_store._rows
    finally:
        index_store.delete_group(big)
        index_store.delete_group(small)


@needs_server
def test_a_small_group_s_space_is_read_once_and_searched_in_the_client(monkeypatch: pytest.MonkeyPatch) -> None:
    """At most ``exact_max`` vectors: the space is read once per store version and searched in
    the client; the hits equal the server's exact scan (whole and restricted), and a write is
    seen by the next search. Above ``exact_max`` the index answers instead."""
    store = Neo4jBackend(Neo4jBackend.Params(exact_max=50)).open(NEO4J_URI, settings=Settings(neo4j_password=PASSWORD))
    assert isinstance(store, Neo4jStore)
    group = f"small-{uuid.uuid4().hex[:8]}"
    rng = np.random.default_rng(3)
    dim = 16
    mat = rng.normal(size=(40, dim)).astype(np.float32)
    ids = [f"c{i:02d}" for i in range(len(mat))]
    q = rng.normal(size=dim).astype(np.float32)
    prop = f"vec_chunk_{dim}"
    sent: list[str] = []
    real_rows = store._rows

    def rows(what: str, *args: object, **kw: object) -> list[dict[str, object]]:
        sent.append(what)
        return real_rows(what, *args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(store, "_rows", rows)
    try:
        store.write(group, [Node(id=i, label=Label.CHUNK, group=group) for i in ids], vectors={VectorSpace.CHUNK: (ids, mat)})
        qv = (q / np.linalg.norm(q)).tolist()
        hits = store.vector_search(group, VectorSpace.CHUNK, q, 7)
        assert store.last_search_path == "exact"
        server = store._exact(group, prop, qv, 7, None)
        assert [h[0] for h in hits] == [h[0] for h in server]
        np.testing.assert_allclose([h[1] for h in hits], [h[1] for h in server], atol=1e-5)
        allowed = ids[::3]
        narrowed = store.vector_search(group, VectorSpace.CHUNK, q, 4, restrict_to=[*allowed, "nope"])
        assert [h[0] for h in narrowed] == [h[0] for h in store._exact(group, prop, qv, 4, allowed)]
        assert sent.count("vector matrix") == 1  # both searches used the one read
        sent.clear()
        store.vector_search(group, VectorSpace.CHUNK, -q, 3)
        assert sent == []  # nothing but the version read: no scan in the server
        # a write moves the version: the next search reads the space again and sees it
        store.write(group, [Node(id="c99", label=Label.CHUNK, group=group)], vectors={VectorSpace.CHUNK: (["c99"], q[None, :])})
        assert store.vector_search(group, VectorSpace.CHUNK, q, 1)[0][0] == "c99"
        assert sent.count("vector matrix") == 1
        # past exact_max the space is not held: the index answers
        more = [f"d{i:02d}" for i in range(20)]
        store.write(group, [Node(id=i, label=Label.CHUNK, group=group) for i in more],
                    vectors={VectorSpace.CHUNK: (more, rng.normal(size=(len(more), dim)).astype(np.float32))})
        sent.clear()
        store.vector_search(group, VectorSpace.CHUNK, q, 3)
        assert "vector matrix" not in sent and store.last_search_path.startswith("index")
    finally:
        store.delete_group(group)
        store.close()


@needs_server
def test_store_params_reach_the_neo4j_backend() -> None:
    """GRAPHROUTE_STORE_PARAMS' neo4j section sets the Neo4j store's parameters."""
    settings = Settings(neo4j_password=PASSWORD, store_params={"neo4j": {"exact_max": 7, "oversample": 3}})
    store = open_store(NEO4J_URI, settings=settings)
    assert isinstance(store, Neo4jStore)
    assert (store.exact_max, store.oversample) == (7, 3)
    default = open_store(NEO4J_URI, settings=Settings(neo4j_password=PASSWORD))
    assert isinstance(default, Neo4jStore) and (default.exact_max, default.oversample) == (2_000, 10)
    store.close()
    default.close()
