"""POST /index jobs on the real app (FastAPI's TestClient over the ASGI app, a real embedded
store, the default index profile): what a job reports, what a group may be called, and what
happens to uploaded text when its document or group is deleted."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from graphroute.core import GraphRoute
from graphroute.core.apps.serve.server import ServerConfig, create_app

from tests.server.live import finished

CANTEEN = {"title": "Canteen", "text": "The canteen on the third floor serves lunch from noon until two."}
GARDEN = {"title": "Garden", "text": "The roof garden is open to staff on weekdays from eight to six."}


@pytest.fixture
def uploads(tmp_path: Path) -> Path:
    return tmp_path / "uploads"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """An --index-root folder with a blank file and a link to a file outside it."""
    root = tmp_path / "root1"
    (root / "sub").mkdir(parents=True)
    (root / "sub" / "blank.md").write_text("   \n", encoding="utf-8")
    outside = tmp_path / "outside.md"
    outside.write_text("# Outside\n\nThis file is not under the index root.\n", encoding="utf-8")
    (root / "sub" / "link.md").symlink_to(outside)
    return root


@pytest.fixture
def client(tmp_path: Path, uploads: Path, root: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[TestClient]:
    monkeypatch.setenv("GRAPHROUTE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("GRAPHROUTE_PROGRESS", "0")
    gr = GraphRoute(store=str(tmp_path / "store"), group="t")
    app = create_app(ServerConfig(upload_dir=uploads, index_roots=[root], request_timeout_s=600), gr)
    with TestClient(app) as c:
        yield c
    gr.close()


def test_a_job_that_indexed_nothing_failed_and_names_no_server_path(client: TestClient, root: Path, uploads: Path) -> None:
    job = finished(client, {"group": "t", "documents": [{"title": "Blank", "text": "   "}]})
    assert job["state"] == "failed" and job["progress"]["phase"] == "failed", job
    assert job["report"]["indexed"] == 0 and job["error"] and "nothing was indexed" in job["error"]
    assert [f["path"] for f in job["report"]["failed"]] == ["Blank"]  # the title, not the upload's file
    assert uploaded(uploads) == []  # what could not be indexed is not kept on the server

    job = finished(client, {"group": "t", "paths": [str(root)]})
    assert job["state"] == "failed", job
    assert sorted(f["path"] for f in job["report"]["failed"]) == ["sub/blank.md", "sub/link.md"]
    text = str(job)
    assert str(root) not in text and str(uploads) not in text and str(root.parent) not in text

    # something indexed and something failed: the job succeeded, and its report says what failed
    job = finished(client, {"group": "t", "documents": [CANTEEN, {"title": "Blank", "text": "   "}]})
    assert job["state"] == "succeeded" and job["error"] is None, job
    assert job["report"]["indexed"] == 1 and [f["path"] for f in job["report"]["failed"]] == ["Blank"]
    assert uploaded(uploads) == ["Canteen"]
    # an update that cannot be read keeps the file its document was read from
    job = finished(client, {"group": "t", "documents": [{"title": "Canteen", "text": "  "}]})
    assert job["report"]["failed"] and uploaded(uploads) == ["Canteen"]
    assert [d["title"] for d in client.get("/groups/t/documents").json()["documents"]] == ["Canteen"]


def uploaded(uploads: Path) -> list[str]:
    return sorted(p.name.rsplit("-", 1)[0] for p in uploads.rglob("*.md"))


def test_deleting_over_http_removes_the_uploaded_text(client: TestClient, uploads: Path, root: Path) -> None:
    (root / "kept.md").write_text("# Kept\n\nThe index root's own file stays where it is.\n", encoding="utf-8")
    assert finished(client, {"group": "t", "documents": [CANTEEN, GARDEN]})["state"] == "succeeded"
    assert finished(client, {"group": "t", "paths": [str(root / "kept.md")]})["state"] == "succeeded"
    assert finished(client, {"group": "u", "documents": [CANTEEN]})["state"] == "succeeded"
    assert uploaded(uploads) == ["Canteen", "Canteen", "Garden"]

    r = client.delete("/groups/t/documents/Canteen")
    assert r.status_code == 200, r.text
    assert uploaded(uploads) == ["Canteen", "Garden"]  # group u's Canteen is its own
    assert [d["title"] for d in client.get("/groups/u/documents").json()["documents"]] == ["Canteen"]
    r = client.delete("/groups/t/documents/Kept")
    assert r.status_code == 200 and (root / "kept.md").exists()  # not an upload: never deleted

    r = client.delete("/groups/t")
    assert r.status_code == 200, r.text
    assert uploaded(uploads) == ["Canteen"]
    r = client.delete("/groups/u")
    assert r.status_code == 200 and uploaded(uploads) == []


@pytest.mark.parametrize("group", ["../x", "  ", "a/b", "..", " padded", "tab\there", "back\\slash"])
def test_a_new_group_needs_a_name_a_url_can_hold(client: TestClient, group: str) -> None:
    r = client.post("/index", json={"group": group, "documents": [CANTEEN]})
    assert r.status_code == 400, r.text
    assert set(r.json()) == {"error", "message", "request_id"} and r.json()["error"] == "bad_group"
    assert "group name" in r.json()["message"]
    assert group not in [g["group"] for g in client.get("/groups").json()]


def test_a_group_name_with_spaces_and_accents_works_in_every_path(client: TestClient) -> None:
    group = "Équipe été 2025"
    assert finished(client, {"group": group, "documents": [CANTEEN]})["state"] == "succeeded"
    from urllib.parse import quote

    path = f"/groups/{quote(group, safe='')}"
    r = client.get(f"{path}/documents")
    assert r.status_code == 200 and r.json()["group"] == group, r.text
    assert client.delete(f"{path}/documents/Canteen").status_code == 200


def test_stopping_the_server_stops_a_running_job_and_the_next_run_finishes_it(
    client: TestClient, uploads: Path, tmp_path: Path
) -> None:
    documents = [{"title": f"Note {k}", "text": f"Room {k} is booked through the facilities desk on floor {k % 9}."}
                 for k in range(400)]
    r = client.post("/index", json={"group": "t", "documents": documents})
    assert r.status_code == 202, r.text
    job_id = r.json()["id"]
    deadline = time.monotonic() + 600
    job = r.json()
    while "step" not in job["progress"]:  # indexing has begun
        assert time.monotonic() < deadline and job["state"] in ("queued", "running"), job
        time.sleep(0.05)
        job = client.get(f"/jobs/{job_id}").json()
    app: Any = client.app
    app.state.jobs.shutdown()  # what the server's shutdown (Ctrl+C) does
    while job["state"] == "running":
        assert time.monotonic() < deadline, job
        time.sleep(0.05)
        job = client.get(f"/jobs/{job_id}").json()
    assert job["state"] == "failed" and "server stopped during the job" in job["error"], job
    # the next run of the same input finishes the group as a whole run would have
    gr = GraphRoute(store=str(tmp_path / "store"), group="t")
    report = gr.index(sorted(uploads.rglob("*.md")), group="t")
    assert report.failed == [] and len(gr.documents("t")) == 400
    assert gr.query("Who books room 7?", group="t").citations
    gr.close()


def test_an_upload_keeps_its_title_when_its_text_opens_with_a_heading(client: TestClient) -> None:
    # quickstart.md's upload: the title it was sent with names the document, and its one H1
    # is the first section under it
    travel = {"title": "Travel policy", "text": "# Approvals\n\nTravel requests are approved by the department head."}
    rules = {"title": "Expense rules", "text": "# Approvals\n\nExpenses are approved by the finance team."}
    assert finished(client, {"group": "h", "documents": [travel, rules]})["state"] == "succeeded"
    docs = client.get("/groups/h/documents").json()["documents"]
    assert sorted(d["title"] for d in docs) == ["Expense rules", "Travel policy"]
    r = client.post("/query", json={"group": "h", "question": "Who approves travel requests?", "route": "route1s_sentence"})
    assert r.status_code == 200, r.text
    cited = r.json()["citations"][0]
    assert cited["document"] == "Travel policy" and cited["section_path"] == "Travel policy > Approvals"
    assert client.delete("/groups/h/documents/Travel%20policy").status_code == 200
    assert [d["title"] for d in client.get("/groups/h/documents").json()["documents"]] == ["Expense rules"]
