"""What one request may cost: a hostile or careless client's values are refused with a short
message naming the parameter and its limit, and never make the server do unbounded work."""

from __future__ import annotations

import http.server
import json
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient
from graphroute.core import GraphRoute

from tests.server.conftest import make_app

BIG = 300_000  # characters: far above any limit, well under the body limit the client gets


@pytest.fixture
def client(engine: GraphRoute) -> TestClient:
    return TestClient(make_app(engine, max_body_bytes=2_000_000))


@pytest.mark.parametrize(
    ("overrides", "says"),
    [
        ({"overlap.top_k": "9" * BIG}, "top_k"),  # a value
        ({"overlap.top_k": list(range(BIG // 8))}, "top_k"),  # a value that is not text
        ({"overlap": {"p" * BIG: 1}}, "parameter name"),
        ({"s" * BIG: {"top_k": 1}}, "stage id"),
        ({"o" * BIG + ".top_k": 1}, "stage id"),
        ({"k" * BIG: 1}, "bad override key"),
    ],
    ids=["value", "list-value", "param-name", "stage-id", "dotted-stage-id", "bad-key"],
)
def test_an_error_repeats_a_short_prefix_of_a_huge_override(client: TestClient, overrides: dict, says: str) -> None:
    r = client.post("/query", json={"question": "travel", "route": "t_route", "overrides": overrides})
    assert r.status_code == 400, r.text[:300]
    assert says in r.json()["message"]
    assert len(r.content) < 3000, r.text[:300]


@pytest.mark.parametrize("shape", ["dotted", "nested"])
def test_a_deeply_nested_override_value_is_refused(client: TestClient, shape: str) -> None:
    value = json.loads("[" * 600 + "]" * 600)  # deep enough to exhaust the recursive copy
    overrides = {"overlap.top_k": value} if shape == "dotted" else {"overlap": {"top_k": value}}
    r = client.post("/query", json={"question": "travel", "route": "t_route", "overrides": overrides})
    assert r.status_code == 400, r.text[:300]  # was a 500 (RecursionError)
    assert r.json()["message"] == (
        "<route>: stage 'overlap': API overrides: the value of overlap.top_k nests more than 32 levels deep\n"
        "  fix: a stage's parameters are a few levels deep; write the value flatter"
    )


CUE_ROUTE = (
    "name: t_cues\ndescription: weight_profile's cues, then word overlap\nstages:\n"
    "  - use: weight_profile\n    with: {use_embeddings: false}\n  - use: t_overlap\n  - use: t_answer\n"
)
# a cue that backtracks exponentially on a run of a's that does not end the question: with
# the re module 40 a's take over a minute with the interpreter lock held (the server froze)
EVIL = {"evil": {"w1": 0.5, "w2": 0.3, "w3": 0.2, "cues": ["(a|aa)+$"]}}


def test_a_backtracking_cue_stops_at_the_deadline_and_the_server_keeps_answering(engine: GraphRoute, routes_dir: Path) -> None:
    (routes_dir / "t_cues.yaml").write_text(CUE_ROUTE, encoding="utf-8")
    client = TestClient(make_app(engine, request_timeout_s=2.0))
    ok = client.post("/query", json={"question": "travel requests", "route": "t_cues"})
    assert ok.status_code == 200, ok.text

    def evil() -> httpx.Response:
        return client.post("/query", json={"question": "a" * 40 + "!", "route": "t_cues",
                                           "overrides": {"weight_profile": {"profiles": EVIL}}})

    with ThreadPoolExecutor(max_workers=1) as pool:
        t0 = time.perf_counter()
        running = pool.submit(evil)
        time.sleep(0.5)
        health_t0 = time.perf_counter()
        health = client.get("/health")
        health_s = time.perf_counter() - health_t0
        r = running.result(timeout=120)
        took = time.perf_counter() - t0
    assert health.status_code == 200 and health_s < 2.0, health_s
    assert r.status_code == 504 and r.json()["error"] == "timeout", r.text
    assert took < 10.0, took  # the 2 s limit plus the regex module's check interval, on a busy machine
    again = client.post("/query", json={"question": "travel requests", "route": "t_cues"})
    assert again.status_code == 200  # the query's thread was freed


@pytest.mark.parametrize(
    ("profiles", "says"),
    [
        ({"p": {"w1": 0.5, "w2": 0.3, "w3": 0.2, "cues": ["("]}}, "is not a regular expression"),
        ({"p": {"w1": 0.5, "w2": 0.3, "w3": 0.2, "cues": ["x"] * 21}}, "at most 20 items"),
        ({"p": {"w1": 0.5, "w2": 0.3, "w3": 0.2, "cues": ["x" * 501]}}, "at most 500 characters"),
        ({"p": {"w1": 0.5, "w2": 0.3, "w3": 0.2, "examples": [f"q{i}" for i in range(21)]}}, "at most 20 items"),
        ({f"p{i}": {"w1": 0.5, "w2": 0.3, "w3": 0.2} for i in range(21)}, "at most 20 items"),
    ],
    ids=["bad-regex", "many-cues", "long-cue", "many-examples", "many-profiles"],
)
def test_weight_profile_profiles_are_bounded(engine: GraphRoute, routes_dir: Path, profiles: dict, says: str) -> None:
    (routes_dir / "t_cues.yaml").write_text(CUE_ROUTE, encoding="utf-8")
    client = TestClient(make_app(engine))
    r = client.post("/query", json={"question": "travel", "route": "t_cues", "overrides": {"weight_profile": {"profiles": profiles}}})
    assert r.status_code == 400 and r.json()["error"] == "route_config", r.text
    message = r.json()["message"]
    assert "bad value for `profiles" in message and "of stage `weight_profile`" in message and says in message, message


@pytest.fixture
def listener() -> Iterator[tuple[str, list[str]]]:
    """A loopback HTTP server that records the Authorization header of every request."""
    seen: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            seen.append(self.headers.get("authorization") or "")
            self.rfile.read(int(self.headers.get("content-length") or 0))
            self.send_response(500)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1", seen
    server.shutdown()


def test_a_request_cannot_point_a_stage_at_its_own_url_with_a_server_secret(
    engine: GraphRoute, routes_dir: Path, listener: tuple[str, list[str]], monkeypatch: pytest.MonkeyPatch,
) -> None:
    pytest.importorskip("openai")
    url, seen = listener
    monkeypatch.setenv("GR_TEST_SERVER_SECRET", "the-servers-own-secret")
    (routes_dir / "t_cues.yaml").write_text(CUE_ROUTE, encoding="utf-8")
    client = TestClient(make_app(engine))
    llm_params = {"base_url": url, "api_key_env": "GR_TEST_SERVER_SECRET", "max_retries": 0, "cache": False}
    for overrides in (
        {"weight_profile": {"classifier": "llm", "llm": "openai", "llm_params": llm_params}},
        {"weight_profile.classifier": "llm", "weight_profile.llm": "openai", "weight_profile.llm_params": llm_params},
    ):
        r = client.post("/query", json={"question": "travel", "route": "t_cues", "overrides": overrides})
        assert r.status_code == 400 and r.json()["error"] == "route_config", r.text
        assert "of stage `weight_profile` cannot be set in a request" in r.json()["message"]
    assert seen == []  # before: "Bearer the-servers-own-secret", sent to the client's URL
    plain = client.post("/query", json={"question": "travel", "route": "t_cues", "overrides": {"weight_profile.use_embeddings": False}})
    assert plain.status_code == 200, plain.text


def test_a_cue_that_runs_out_of_the_query_s_time_is_a_timeout_even_a_hair_before_the_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    """The cue's regex is given the query's remaining time; when it runs out the query has
    timed out (504), even if the clock, read a moment later, is still a hair short of the
    deadline (it was a 500 `stage_failed` then)."""
    import regex
    from graphroute.core.errors import QueryTimeoutError
    from graphroute.core.lib.deadline import deadline_in
    from graphroute.plugins.seeds import tiers

    def ran_out(*args: object, **kwargs: object) -> None:
        raise TimeoutError("regex timed out")

    monkeypatch.setattr(regex, "search", ran_out)
    with deadline_in(60.0), pytest.raises(QueryTimeoutError):
        tiers.cue_matches("(a|aa)+$", "aaaa!")
