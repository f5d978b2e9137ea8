"""The HTTP API in-process (FastAPI's TestClient): shapes, errors, auth and limits."""

from __future__ import annotations

import io
import json
import logging
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from graphroute.core import GraphRoute
from graphroute.core.apps.serve.server import LOGGER_NAME, JsonFormatter, redact_paths
from graphroute.core.config.overrides import overrides_from_mapping
from graphroute.core.config.resolve import load_route

from tests.server.conftest import make_app

TOKEN = "s3cret-token-for-tests"


@pytest.fixture
def client(engine: GraphRoute) -> TestClient:
    return TestClient(make_app(engine))


def strip_timing(data: dict) -> dict:
    data = json.loads(json.dumps(data))
    data.pop("duration_ms", None)
    for t in data["trace"]:
        t.pop("duration_ms", None)
    return data


def test_query_returns_the_cli_json(client: TestClient, engine: GraphRoute) -> None:
    r = client.post("/query", json={"question": "Who approves travel requests?", "route": "t_route"})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["answer"].startswith("Travel requests are approved")
    assert body["citations"][0]["document"] == "Travel policy"
    assert [t["stage"] for t in body["trace"]] == ["overlap", "answer"]
    direct = engine.query("Who approves travel requests?", route="t_route").to_public_json()
    assert strip_timing(body) == strip_timing(direct)


def test_overrides_change_the_run(client: TestClient) -> None:
    r = client.post("/query", json={"question": "are badges reported to the security desk", "route": "t_route",
                                    "overrides": {"overlap.top_k": 1}})
    assert r.status_code == 200, r.text
    assert len(r.json()["evidence"]) == 1
    r2 = client.post("/query", json={"question": "are badges reported to the security desk", "route": "t_route",
                                     "overrides": {"overlap": {"top_k": 3}}})
    assert len(r2.json()["evidence"]) == 3


def test_route_errors_carry_the_cli_message(client: TestClient, engine: GraphRoute) -> None:
    ov = {"overlap.top_k": 0}
    r = client.post("/query", json={"question": "travel", "route": "t_route", "overrides": ov})
    assert r.status_code == 400
    with pytest.raises(Exception) as cli_err:
        load_route("t_route", engine.registry, overrides=overrides_from_mapping(ov))
    assert r.json()["error"] == "route_config"
    # the CLI's message, with the route file named by its name: no server path in a body
    assert r.json()["message"] == redact_paths(cli_err.value.render())  # type: ignore[attr-defined]
    assert r.json()["message"].startswith("t_route.yaml:") and "fix:" in r.json()["message"]

    r = client.post("/query", json={"question": "travel", "route": "t_route", "overrides": {"nosuch.x": 1}})
    assert r.status_code == 400 and "nosuch" in r.json()["message"]
    r = client.post("/query", json={"question": "travel", "route": "t_rout"})
    assert r.status_code == 400 and "did you mean t_route" in r.json()["message"]


def test_route_names_are_never_paths(client: TestClient, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "x").write_text("name: x\nstages: [{use: t_overlap}]\n", encoding="utf-8")
    secret = tmp_path / "x.yaml"
    secret.write_text("name: x\nstages: [{use: t_overlap}]\n", encoding="utf-8")
    r = client.post("/query", json={"question": "q", "route": str(secret)})
    assert r.status_code == 422
    assert client.get("/routes/x.yaml").status_code == 404
    for name in ("x.yaml", "../x", "x"):  # a file named like a route in the server's cwd is never read
        r = client.post("/query", json={"question": "q", "route": name})
        assert r.status_code in (400, 422) and "stages" not in r.text
    assert client.post("/index", json={"documents": [{"title": "t", "text": "x"}], "profile": "x.yaml"}).status_code == 422
    r = client.post("/index", json={"documents": [{"title": "t", "text": "x"}], "profile": "nosuch"})
    assert r.status_code == 400 and "shipped profiles: default" in r.json()["message"]
    assert client.get("/routes/..%2F..%2Fetc%2Fpasswd").status_code == 404


def test_unknown_group_is_404_with_a_hint(client: TestClient) -> None:
    r = client.post("/query", json={"question": "travel", "route": "t_route", "group": "nope"})
    assert r.status_code == 404
    assert r.json()["error"] == "unknown_group"
    assert "POST /index" in r.json()["message"]


def test_routes_plugins_health(client: TestClient) -> None:
    names = {r["name"]: r for r in client.get("/routes").json()}
    assert names["t_route"]["description"] == "word overlap then first sentence"
    assert names["t_route"]["shipped"] is False
    detail = client.get("/routes/t_route").json()
    assert detail["config"]["stages"][0] == {"use": "t_overlap", "id": "overlap", "enabled": True, "with": {"top_k": 3}}
    assert "use: t_answer" in detail["yaml"]
    assert client.get("/routes/nosuch").status_code == 404
    plugins = client.get("/plugins").json()["plugins"]
    test_plugin = next(p for p in plugins if p["name"] == "tests.server.stages")
    assert test_plugin["contributes"]["expander"] == ["t_overlap"]
    health = client.get("/health").json()
    assert health["status"] == "ok" and "docs" in health["groups"]
    assert "/query" in client.get("/openapi.json").json()["paths"]


def test_request_id_is_echoed_or_made(client: TestClient) -> None:
    r = client.get("/health", headers={"X-Request-ID": "abc-123"})
    assert r.headers["x-request-id"] == "abc-123"
    r = client.get("/health", headers={"X-Request-ID": "bad id; with spaces"})
    assert len(r.headers["x-request-id"]) == 32 and " " not in r.headers["x-request-id"]
    r = client.post("/query", json={"question": "q", "route": "t_route", "group": "nope"}, headers={"X-Request-ID": "rid-9"})
    assert r.json()["request_id"] == "rid-9"


def test_auth_required_when_a_token_is_set(engine: GraphRoute) -> None:
    client = TestClient(make_app(engine, token=TOKEN))
    q = {"question": "travel", "route": "t_route"}
    r = client.post("/query", json=q)
    assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer"
    assert client.post("/query", json=q, headers={"Authorization": "Bearer wrong"}).status_code == 401
    assert client.post("/query", json=q, headers={"Authorization": f"Basic {TOKEN}"}).status_code == 401
    assert client.post("/query", json=q, headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 200
    for path in ("/routes", "/plugins", "/routes/t_route", "/jobs/x"):
        assert client.get(path).status_code == 401, path
    assert client.get("/health").status_code == 200  # liveness stays open


def test_oversize_bodies_are_rejected(client: TestClient) -> None:
    big = {"question": "x" * 5000, "route": "t_route"}
    r = client.post("/query", json=big)
    assert r.status_code == 413 and r.json()["error"] == "too_large"

    def chunks():  # no Content-Length: the limit must hold on the bytes received
        yield b'{"question": "'
        for _ in range(10):
            yield b"y" * 1000
        yield b'", "route": "t_route"}'

    r = client.post("/query", content=chunks(), headers={"content-type": "application/json"})
    assert r.status_code == 413


def test_slow_queries_time_out(engine: GraphRoute) -> None:
    client = TestClient(make_app(engine, request_timeout_s=0.3))
    r = client.post("/query", json={"question": "travel", "route": "t_slow"})
    assert r.status_code == 504 and r.json()["error"] == "timeout"
    fast = client.post("/query", json={"question": "travel", "route": "t_slow", "overrides": {"sleep.enabled": False}})
    assert fast.status_code == 200


def test_server_side_paths_need_an_allowed_root(engine: GraphRoute, tmp_path: Path) -> None:
    client = TestClient(make_app(engine))
    assert client.post("/index", json={"paths": ["/etc"]}).status_code == 403
    root = tmp_path / "allowed"
    root.mkdir()
    client = TestClient(make_app(engine, index_roots=[root]))
    r = client.post("/index", json={"paths": [str(tmp_path / "store")]})
    assert r.status_code == 403 and r.json()["error"] == "path_not_allowed"
    r = client.post("/index", json={"paths": ["../store"]})
    assert r.status_code == 403
    assert client.post("/index", json={}).status_code == 400
    assert client.get("/jobs/nope").status_code == 404


def test_logs_are_json_with_request_ids_and_no_secret(engine: GraphRoute) -> None:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter(lambda: [TOKEN]))
    logger = logging.getLogger(LOGGER_NAME)
    logger.addHandler(handler)
    old = logger.level
    logger.setLevel(logging.INFO)
    try:
        client = TestClient(make_app(engine, token=TOKEN))
        client.post("/query", json={"question": f"travel {TOKEN}", "route": "t_route"},
                    headers={"Authorization": f"Bearer {TOKEN}", "X-Request-ID": "log-1"})
        client.get("/routes", headers={"Authorization": "Bearer wrong"})
        logger.info("token is %s", TOKEN)  # even a careless message is masked
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old)
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    requests = [ln for ln in lines if ln["event"] == "request"]
    assert {k: requests[0][k] for k in ("request_id", "path", "status")} == {"request_id": "log-1", "path": "/query", "status": 200}
    assert requests[1]["status"] == 401
    assert TOKEN not in stream.getvalue()
    assert lines[-1]["event"] == "token is ***"


@pytest.mark.parametrize(("host", "loopback"), [
    ("127.0.0.1", True), ("127.0.0.2", True), ("::1", True), ("[::1]", True), ("localhost", True),
    ("0.0.0.0", False), ("::", False), ("10.1.2.3", False), ("example.com", False),
])
def test_loopback_detection(host: str, loopback: bool) -> None:
    from graphroute.core.apps.serve.commands import is_loopback

    assert is_loopback(host) is loopback


def test_concurrent_queries_share_one_engine(engine: GraphRoute) -> None:
    from concurrent.futures import ThreadPoolExecutor

    client = TestClient(make_app(engine, query_workers=4))
    questions = ["Who approves travel requests?", "Where are lost badges reported?"] * 4
    with ThreadPoolExecutor(max_workers=8) as pool:
        answers = list(pool.map(lambda q: client.post("/query", json={"question": q, "route": "t_route"}), questions))
    assert all(r.status_code == 200 for r in answers)
    assert {r.json()["citations"][0]["document"] for r in answers[0::2]} == {"Travel policy"}
    assert {r.json()["citations"][0]["document"] for r in answers[1::2]} == {"Security handbook"}


def test_error_messages_give_the_request_path_as_sent(client: TestClient) -> None:
    r = client.get("/foo/bar/baz")
    assert r.status_code == 404 and r.json()["message"] == "no such endpoint: GET /foo/bar/baz (see /docs)"
    r = client.put("/groups/g1")
    assert r.status_code == 405 and r.json()["message"] == "PUT is not allowed on /groups/g1"
    r = client.get("/no/such/%2e%2e%2Fplace")
    assert r.status_code == 404 and "GET /no/such/%2e%2e%2Fplace " in r.json()["message"]
    r = client.get("/" + "x/" * 200)
    assert r.status_code == 404 and len(r.json()["message"]) < 200  # a prefix of a long path, not all of it


def test_the_schema_and_the_docs_pages_need_the_token(engine: GraphRoute) -> None:
    client = TestClient(make_app(engine, token=TOKEN))
    auth = {"Authorization": f"Bearer {TOKEN}"}
    for path in ("/openapi.json", "/docs", "/redoc"):
        r = client.get(path)
        assert r.status_code == 401 and r.json()["error"] == "unauthorized", path
        assert client.get(path, headers=auth).status_code == 200, path
    assert "/query" in client.get("/openapi.json", headers=auth).json()["paths"]
    assert "/openapi.json" in client.get("/docs", headers=auth).text
    # the pages' script and style files are the Swagger UI and ReDoc libraries: no token, as the playground's
    assert client.get("/static-offline-docs/swagger-ui.css").status_code == 200
