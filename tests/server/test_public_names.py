"""No answer of the API shows where the server keeps a file: the documents listing, a query's
evidence and citations, and the playground's runs name a document's file as the index jobs'
reports do (relative to its --index-root, an upload by the title it was uploaded under, any
other file by its name). The real app (FastAPI's TestClient) over a real embedded store
indexed with the default profile."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from graphroute.core import GraphRoute
from graphroute.core.apps.serve.playground import mount_playground
from graphroute.core.apps.serve.server import ServerConfig, create_app

from tests.server.live import finished

UPLOADED = [
    {"title": "Canteen", "text": "The canteen on the third floor serves lunch from noon until two."},
    # a single leading heading becomes the document's title: the upload keeps the name it was sent with
    {"title": "Library rules", "text": "# Borrowing\n\nThe library on the second floor lends books for three weeks."},
]


@pytest.fixture
def served(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[TestClient, Path]]:
    monkeypatch.setenv("GRAPHROUTE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("GRAPHROUTE_PROGRESS", "0")
    root = tmp_path / "root"
    (root / "sub").mkdir(parents=True)
    (root / "sub" / "badges.md").write_text("# Badges\n\nLost badges are reported to the security desk.\n", encoding="utf-8")
    # an entry with a blank title: the loader titles it by its source, the file's path
    (root / "rooms.json").write_text(json.dumps([{"title": "  ", "text": "The archive room in the basement keeps old contracts."}]),
                                     encoding="utf-8")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "parking.md").write_text("# Parking\n\nThe garage under the building has forty spaces.\n", encoding="utf-8")
    gr = GraphRoute(store=str(tmp_path / "store"), group="t")
    gr.index([elsewhere / "parking.md"])  # indexed on the server's command line, outside any --index-root
    app = create_app(ServerConfig(upload_dir=tmp_path / "uploads", index_roots=[root], request_timeout_s=600), gr)
    mount_playground(app)
    with TestClient(app) as c:
        job = finished(c, {"group": "t", "paths": [str(root)], "documents": UPLOADED})
        assert job["state"] == "succeeded" and job["report"]["indexed"] == 4, job
        yield c, tmp_path
    gr.close()


def test_the_documents_listing_names_files_as_the_client_knows_them(served: tuple[TestClient, Path]) -> None:
    client, tmp = served
    r = client.get("/groups/t/documents")
    assert r.status_code == 200, r.text
    assert str(tmp) not in r.text  # no server path, whatever the field
    listed = {d["title"]: d["path"] for d in r.json()["documents"]}
    assert listed == {
        "Badges": "sub/badges.md",  # relative to the --index-root
        "rooms.json#0": "rooms.json#0",  # a title that was the server path of its JSON entry
        "Canteen": "Canteen",  # an upload: the title it was uploaded under
        "Library rules": "Library rules",  # its text opens with "# Borrowing": a section, not its title
        "Parking": "parking.md",  # outside every --index-root: the file's name
    }


def test_evidence_and_citations_name_no_server_path(served: tuple[TestClient, Path]) -> None:
    client, tmp = served
    r = client.post("/query", json={"question": "Which room keeps old contracts?", "route": "bm25"})
    assert r.status_code == 200, r.text
    assert str(tmp) not in r.text
    body = r.json()
    assert body["evidence"][0]["document"] == "rooms.json#0" and body["evidence"][0]["section_path"] == "rooms.json#0"
    assert body["citations"][0]["document"] == "rooms.json#0"

    r = client.post("/playground/query", json={"question": "Which room keeps old contracts?", "config": {"route": "bm25"}})
    assert r.status_code == 200, r.text
    assert str(tmp) not in r.text
    assert r.json()["result"]["evidence"][0]["document"] == "rooms.json#0"

    # a question set's gold may name the document by the title the listing shows
    r = client.post("/playground/ab/questions", json={
        "a": {"route": "bm25"}, "b": {"route": "bm25"},
        "questions": [{"question": "Which room keeps old contracts?", "gold": ["rooms.json#0"]}],
    })
    assert r.status_code == 200, r.text
    assert str(tmp) not in r.text and r.json()["unresolved_gold"] == []
