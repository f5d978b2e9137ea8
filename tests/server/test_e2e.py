"""End to end: `graphroute serve` as a real uvicorn process on a loopback port, driven over
HTTP with httpx: index documents -> the job completes -> query -> health, with a token."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.server.live import live_server

TOKEN = "e2e-token-0123456789"
GRAPHROUTE = str(Path(sys.executable).parent / "graphroute")

DOCUMENTS = [
    {"title": "Travel policy", "text": "# Approvals\n\nTravel requests are approved by the department head. "
     "Requests above 5,000 euros also need the finance director.\n\n# Expenses\n\n"
     "Receipts must be filed within thirty days of the trip."},
    {"title": "Security handbook", "text": "Badges must be worn at all times on site. "
     "Lost badges are reported to the security desk within one day."},
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    port = free_port()
    log = tmp_path / "server.log"
    env = {**os.environ, "GRAPHROUTE_TOKEN": TOKEN, "GRAPHROUTE_CACHE": str(tmp_path / "cache"),
           "GRAPHROUTE_PROGRESS": "0", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    env.pop("GRAPHROUTE_ROUTES", None)
    args = [GRAPHROUTE, "serve", "--store", str(tmp_path / "store"), "--group", "handbook",
            "--host", "127.0.0.1", "--port", str(port)]
    with live_server(args, port, env, log, tmp_path) as base:
        yield base, log


def test_index_then_query_then_health(server: tuple[str, Path]) -> None:
    base, log = server
    auth = {"Authorization": f"Bearer {TOKEN}"}
    with httpx.Client(base_url=base, headers=auth, timeout=120) as client:
        assert httpx.post(f"{base}/index", json={"documents": DOCUMENTS}).status_code == 401

        r = client.post("/index", json={"documents": DOCUMENTS})
        assert r.status_code == 202, r.text
        job = r.json()
        assert job["state"] in ("queued", "running") and job["group"] == "handbook"
        deadline = time.monotonic() + 300
        while job["state"] in ("queued", "running"):
            assert time.monotonic() < deadline, f"job did not finish: {job}"
            time.sleep(0.5)
            job = client.get(f"/jobs/{job['id']}").json()
        assert job["state"] == "succeeded", job
        assert job["report"]["indexed"] == 2
        assert job["progress"]["phase"] == "done" and job["progress"]["inputs"] == 2
        assert job["progress"]["step"] and job["progress"]["completed"] >= 1  # fed by the indexer's bars

        r = client.post("/query", json={"question": "Who approves travel requests?", "route": "route1s_sentence"},
                        headers={"X-Request-ID": "e2e-query-1"})
        assert r.status_code == 200, r.text
        assert r.headers["x-request-id"] == "e2e-query-1"
        body = r.json()
        assert "department head" in body["answer"]
        assert body["citations"] and body["citations"][0]["document"] == "Travel policy"
        assert body["trace"] and all("duration_ms" in t for t in body["trace"])

        health = client.get("/health").json()
        assert health["status"] == "ok" and health["groups"] == ["handbook"] and health["backend"] == "embedded"

        r = client.post("/query", json={"question": "q", "group": "other"})
        assert r.status_code == 404 and "POST /index" in r.json()["message"]

    text = log.read_text()
    assert TOKEN not in text
    lines = [json.loads(line) for line in text.splitlines() if line.strip()]  # JSON lines only
    assert any(ln.get("request_id") == "e2e-query-1" and ln.get("status") == 200 for ln in lines)
    assert any(ln["event"] == "job finished" and ln["state"] == "succeeded" for ln in lines)


def test_public_bind_without_token_is_refused(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "GRAPHROUTE_TOKEN"}
    r = subprocess.run([GRAPHROUTE, "serve", "--store", str(tmp_path / "s"), "--host", "0.0.0.0", "--port", "1"],
                       capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 2
    assert "refusing to listen on 0.0.0.0 without a token" in r.stderr
    assert "Traceback" not in r.stderr


def test_serve_without_the_server_extra_names_it(tmp_path: Path) -> None:
    # an install without the `server` extra: uvicorn shadowed by a package that is not there
    shadow = tmp_path / "shadow" / "uvicorn"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ModuleNotFoundError(\"No module named 'uvicorn'\", name='uvicorn')\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(shadow.parent), os.environ.get("PYTHONPATH", "")])}
    r = subprocess.run([GRAPHROUTE, "serve", "--store", str(tmp_path / "s"), "--port", "0"],
                       capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert "pip install 'graphroute[server]'" in r.stderr and "uvicorn" in r.stderr
    assert "Traceback" not in r.stderr and "GRAPHROUTE_DEBUG" not in r.stderr
