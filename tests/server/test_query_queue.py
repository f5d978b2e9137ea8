"""The query queue is bounded: with every query thread busy and `max_queued` more queries
waiting, the next query is refused at once (503 `busy`, `Retry-After`) without its body
being read, while `/health` keeps answering; under the bound every query is answered. A real
uvicorn server on a loopback port, real concurrent httpx clients, the real embedded store."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import httpx
from graphroute.core import GraphRoute
from graphroute.core.apps.serve.playground import mount_playground
from graphroute.core.apps.serve.server import (
    BUSY_RETRY_AFTER_S,
    DEFAULT_QUEUED_PER_THREAD,
    ServerConfig,
)

from tests.server.conftest import make_app
from tests.server.live import live_server, serve_app

SLEEP_S = 1.5  # each query's time in its thread: long enough that every client has arrived meanwhile


def slow_query(k: int, seconds: float = SLEEP_S) -> dict[str, Any]:
    return {"question": f"Who approves travel requests? ({k})", "route": "t_slow", "overrides": {"sleep.seconds": seconds}}


async def fire(base: str, bodies: list[dict[str, Any]], path: str = "/query") -> list[tuple[int, float, httpx.Response]]:
    """POST every body at once, each on its own connection; (status, seconds, response) each."""
    async with httpx.AsyncClient(base_url=base, timeout=60, limits=httpx.Limits(max_connections=len(bodies))) as client:

        async def one(body: dict[str, Any]) -> tuple[int, float, httpx.Response]:
            t0 = time.perf_counter()
            r = await client.post(path, json=body)
            return r.status_code, time.perf_counter() - t0, r

        return list(await asyncio.gather(*(one(b) for b in bodies)))


def test_queries_past_the_bound_are_refused_at_once_and_health_answers(engine: GraphRoute) -> None:
    app = make_app(engine, query_workers=1, max_queued=2)  # one running, two waiting
    mount_playground(app)

    async def scenario(base: str) -> tuple[list[tuple[int, float, httpx.Response]], httpx.Response, float, httpx.Response]:
        queries = asyncio.create_task(fire(base, [slow_query(k) for k in range(12)]))
        await asyncio.sleep(0.5)  # the queue is full now: the first query sleeps SLEEP_S
        async with httpx.AsyncClient(base_url=base, timeout=30) as client:
            t0 = time.perf_counter()
            health = await client.get("/health")
            health_s = time.perf_counter() - t0
            listing = await client.get("/groups")  # other work for the query threads waits in the same queue
        return await queries, health, health_s, listing

    with serve_app(app) as base:
        results, health, health_s, listing = asyncio.run(scenario(base))

    statuses = [s for s, _, _ in results]
    assert statuses.count(200) == 3 and statuses.count(503) == 9, statuses  # threads + max_queued answered
    for status, seconds, r in results:
        if status == 503:
            assert seconds < SLEEP_S, seconds  # refused at once, not after waiting for a thread
            assert r.headers["retry-after"] == str(BUSY_RETRY_AFTER_S)
            body = r.json()
            assert set(body) == {"error", "message", "request_id"} and body["error"] == "busy", body
            assert "--max-queued" in body["message"]
        else:
            assert r.json()["citations"][0]["document"] == "Travel policy"
    assert health.status_code == 200 and health_s < 1.0, (health.status_code, health_s)
    assert listing.status_code == 503 and listing.json()["error"] == "busy" and "retry-after" in listing.headers

    # the playground's runs share the queue
    async def playground(base: str) -> list[tuple[int, float, httpx.Response]]:
        bodies = [{"question": f"Who approves travel requests? ({k})", "config": {"route": "t_slow", "set": [f"sleep.seconds={SLEEP_S}"]}}
                  for k in range(6)]
        return await fire(base, bodies, "/playground/query")

    app = make_app(engine, query_workers=1, max_queued=2)  # a server's pools end with it: a new app
    mount_playground(app)
    with serve_app(app) as base:
        statuses = [s for s, _, _ in asyncio.run(playground(base))]
    assert statuses.count(200) == 3 and statuses.count(503) == 3, statuses


def test_every_query_under_the_bound_is_answered(engine: GraphRoute) -> None:
    app = make_app(engine, query_workers=2, max_queued=8)
    with serve_app(app) as base:
        results = asyncio.run(fire(base, [slow_query(k, 0.3) for k in range(10)]))
        assert [s for s, _, _ in results] == [200] * 10, [r.text for _, _, r in results]
        # and the queue is empty again afterwards: as many again are answered
        results = asyncio.run(fire(base, [slow_query(k, 0.1) for k in range(10)]))
    assert [s for s, _, _ in results] == [200] * 10


def test_a_refused_query_is_answered_without_reading_its_body(engine: GraphRoute) -> None:
    """At the ASGI interface: with the queue full, a 900 KB query is refused before the
    server asks for a single byte of its body."""
    app = make_app(engine, query_workers=1, max_queued=0, max_body_bytes=2_000_000)
    queue = app.state.query_queue
    assert queue.enter()  # the one place, as a running query holds it
    body = json.dumps(slow_query(0)).encode() + b" " * 900_000
    reads: list[int] = []
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        reads.append(1)
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "scheme": "http",
             "path": "/query", "raw_path": b"/query", "root_path": "", "query_string": b"",
             "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
             "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 80)}
    asyncio.run(app(scope, receive, send))
    assert sent[0]["status"] == 503 and reads == []
    assert (b"retry-after", str(BUSY_RETRY_AFTER_S).encode()) in sent[0]["headers"]
    assert json.loads(sent[1]["body"])["error"] == "busy"
    queue.leave()
    sent.clear()
    asyncio.run(app(scope, receive, send))  # a place is free again: the query is read and answered
    assert sent[0]["status"] == 200 and reads == [1]
    assert queue.admitted == 0


def test_the_bound_defaults_to_a_multiple_of_the_threads_and_serve_sets_it(tmp_path: Path) -> None:
    assert ServerConfig(query_workers=3).queue_bound() == 3 * DEFAULT_QUEUED_PER_THREAD
    assert ServerConfig(query_workers=3, max_queued=0).queue_bound() == 0
    env = {**os.environ, "GRAPHROUTE_MAX_QUEUED": "5", "GRAPHROUTE_CACHE": str(tmp_path / "cache"), "GRAPHROUTE_PROGRESS": "0"}
    env.pop("GRAPHROUTE_TOKEN", None)
    graphroute = str(Path(sys.executable).parent / "graphroute")
    log = tmp_path / "server.log"
    args = [graphroute, "serve", "--store", str(tmp_path / "store"), "--port", "0", "--no-preload", "--query-threads", "2"]
    with live_server(args, 0, env, log, tmp_path):
        pass
    serving = next(json.loads(line) for line in log.read_text().splitlines() if '"serving"' in line)
    assert serving["query_threads"] == 2 and serving["max_queued"] == 5
