"""GET /groups, GET /groups/{g}/documents, DELETE /groups/{g}[/documents/{id}] on the real
server (`graphroute serve` as a uvicorn process on a loopback port), with a token."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from graphroute.core.engine import GraphRoute

from tests.server.live import live_server
from tests.server.test_e2e import free_port

TOKEN = "manage-token-0123456789"
GRAPHROUTE = str(Path(sys.executable).parent / "graphroute")


@pytest.fixture
def base(indexed: GraphRoute, tmp_path: Path) -> Iterator[str]:
    store = indexed.settings.store
    indexed.close()
    port = free_port()
    log = tmp_path / "server.log"
    env = {**os.environ, "GRAPHROUTE_TOKEN": TOKEN, "GRAPHROUTE_CACHE": str(indexed.settings.cache_dir),
           "GRAPHROUTE_PROGRESS": "0"}
    args = [GRAPHROUTE, "serve", "--store", store, "--group", "g", "--host", "127.0.0.1", "--port", str(port)]
    with live_server(args, port, env, log, tmp_path) as url:
        yield url


def test_list_and_delete_over_http(base: str) -> None:
    for method, path in (("GET", "/groups"), ("GET", "/groups/g/documents"), ("DELETE", "/groups/h"),
                         ("DELETE", "/groups/g/documents/x")):
        r = httpx.request(method, f"{base}{path}")
        assert r.status_code == 401 and r.json()["error"] == "unauthorized", (method, path)
    with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=120) as client:
        assert client.get("/groups").json() == [
            {"group": "g", "documents": 3, "sentences": 6}, {"group": "h", "documents": 1, "sentences": 2},
        ]
        docs = client.get("/groups/g/documents").json()["documents"]
        assert [d["title"] for d in docs] == ["Harbour", "Lighthouse", "Orchard"]
        lighthouse = docs[1]["id"]
        r = client.get("/groups/nope/documents")
        assert r.status_code == 404 and r.json()["error"] == "not_found" and "nope" in r.json()["message"]

        question = {"question": "Who built the Kestrel Point lighthouse?", "group": "g"}
        assert client.post("/query", json=question).json()["citations"][0]["document"] == "Lighthouse"
        r = client.delete(f"/groups/g/documents/{lighthouse}")
        assert r.status_code == 200, r.text
        assert r.json()["deleted"] == [lighthouse] and r.json()["documents"] == 2
        assert all(c["document"] != "Lighthouse" for c in client.post("/query", json=question).json()["citations"])
        r = client.delete(f"/groups/g/documents/{lighthouse}")
        assert r.status_code == 404 and r.json()["error"] == "not_found"

        r = client.delete("/groups/h")
        assert r.status_code == 200 and r.json()["deleted_group"] is True and r.json()["documents"] == 1
        assert [g["group"] for g in client.get("/groups").json()] == ["g"]
        assert client.delete("/groups/h").status_code == 404
