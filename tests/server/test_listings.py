"""Listings come in bounded pages: `GET /groups/{group}/documents` and `GET /groups` take
`limit` and `offset`, say the total and how to get the next page, and refuse a bad page with
a 400; every other list that grows with the store (the health check's and the playground's
group names, a job report's lists, a question set's documents) is bounded too. On the real
app (FastAPI's TestClient) over a real embedded store."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from graphroute.core import GraphRoute, Node
from graphroute.core.apps.serve import server
from graphroute.core.apps.serve.playground import mount_playground
from graphroute.core.apps.serve.server import DEFAULT_PAGE_LIMIT, MAX_PAGE_LIMIT, MAX_REPORT_ITEMS
from graphroute.plugins.stores.embedded import EmbeddedStore

from tests.server.conftest import make_app
from tests.server.live import finished

MANY = 150  # more documents than a page holds by default


def documents(n: int, group: str = "docs") -> list[Node]:
    """``n`` document nodes, as the indexer writes them (title, source, hash, sentence count)."""
    return [Node(id=f"doc-{k:04d}", label="Document", group=group, doc_id=f"doc-{k:04d}",
                 props={"title": f"Note {k:04d}", "source": f"/srv/corpus/note-{k:04d}.md",
                        "content_hash": f"h{k}", "sentence_count": 1}) for k in range(n)]


@pytest.fixture
def client(engine: GraphRoute) -> TestClient:
    engine.store.write("docs", documents(MANY))
    return TestClient(make_app(engine))


def test_documents_come_in_pages_that_add_up_to_the_group(client: TestClient) -> None:
    r = client.get("/groups/docs/documents")
    assert r.status_code == 200, r.text
    body = r.json()
    assert len(body["documents"]) == DEFAULT_PAGE_LIMIT < MANY  # a default page, not the whole group
    assert (body["total"], body["offset"], body["limit"], body["next_offset"]) == (MANY, 0, DEFAULT_PAGE_LIMIT, DEFAULT_PAGE_LIMIT)
    assert r.headers["x-total-count"] == str(MANY)

    seen: list[str] = []
    url: str | None = "/groups/docs/documents?limit=40"
    pages = 0
    while url:  # follow the Link headers, as a client without the body's fields would
        r = client.get(url)
        assert r.status_code == 200, r.text
        page = r.json()
        assert len(page["documents"]) <= 40
        seen += [d["id"] for d in page["documents"]]
        link = r.headers.get("link")
        assert (link is None) == (page["next_offset"] is None)
        url = link.split(";")[0].strip("<>") if link else None
        pages += 1
    assert pages == 4 and len(seen) == MANY and len(set(seen)) == MANY
    assert seen == sorted(seen)  # ordered by title, as `graphroute documents` lists them

    last = client.get(f"/groups/docs/documents?limit=40&offset={MANY - 10}").json()
    assert len(last["documents"]) == 10 and last["next_offset"] is None
    beyond = client.get(f"/groups/docs/documents?offset={MANY + 5}").json()
    assert beyond["documents"] == [] and beyond["total"] == MANY and beyond["next_offset"] is None


class CountingStore(EmbeddedStore):
    """The embedded store, counting the nodes it reads (each read makes its nodes in ``_node``)."""

    nodes_read = 0

    def _node(self, group: str, row: tuple[Any, ...]) -> Node:  # type: ignore[override]
        self.nodes_read += 1
        return EmbeddedStore._node(group, row)


def test_a_page_of_documents_reads_only_that_page_from_the_store(engine: GraphRoute, tmp_path: Path) -> None:
    engine.store.close()
    engine.store = store = CountingStore(str(tmp_path / "counted"))
    store.write("docs", documents(MANY))
    client = TestClient(make_app(engine))
    store.nodes_read = 0
    page = client.get("/groups/docs/documents?limit=40&offset=80").json()
    assert [d["id"] for d in page["documents"]] == [f"doc-{k:04d}" for k in range(80, 120)]
    assert (page["total"], page["next_offset"]) == (MANY, 120)
    assert store.nodes_read == 40  # the page's documents, not the group's 150; the total is a count


@pytest.mark.parametrize("query", ["limit=0", f"limit={MAX_PAGE_LIMIT + 1}", "limit=-3", "offset=-1", "limit=five", "offset=1.5"])
@pytest.mark.parametrize("path", ["/groups/docs/documents", "/groups"])
def test_a_bad_page_is_a_400(client: TestClient, path: str, query: str) -> None:
    r = client.get(f"{path}?{query}")
    assert r.status_code == 400, r.text
    body = r.json()
    assert set(body) == {"error", "message", "request_id"} and body["error"] == "bad_parameter"
    assert query.split("=")[0] in body["message"]


def test_the_largest_page_is_allowed(client: TestClient) -> None:
    r = client.get(f"/groups/docs/documents?limit={MAX_PAGE_LIMIT}")
    assert r.status_code == 200 and len(r.json()["documents"]) == MANY and r.json()["next_offset"] is None


def test_groups_come_in_pages_and_the_body_stays_a_list(engine: GraphRoute) -> None:
    for name in ("e", "c", "a", "d", "b"):
        engine.store.write(name, documents(2, group=name))
    client = TestClient(make_app(engine))
    everything = ["a", "b", "c", "d", "docs", "e"]
    r = client.get("/groups?limit=4")
    assert r.status_code == 200, r.text
    assert [g["group"] for g in r.json()] == everything[:4]
    assert r.headers["x-total-count"] == "6"
    assert r.headers["link"] == '</groups?limit=4&offset=4>; rel="next"'
    r = client.get("/groups?limit=4&offset=4")
    assert r.json() == [{"group": "docs", "documents": 0, "sentences": 4}, {"group": "e", "documents": 2, "sentences": 0}]
    assert "link" not in r.headers
    assert [g["group"] for g in client.get("/groups").json()] == everything


def test_group_names_elsewhere_are_bounded(engine: GraphRoute, monkeypatch: pytest.MonkeyPatch) -> None:
    """The health check and the playground list group names without paging: at most a page's
    worth (the limit lowered here instead of writing a thousand groups)."""
    for name in ("a", "b", "c"):
        engine.store.write(name, documents(1, group=name))
    monkeypatch.setattr(server, "MAX_PAGE_LIMIT", 2)
    from graphroute.core.apps.serve import playground

    monkeypatch.setattr(playground, "MAX_PAGE_LIMIT", 2)
    app = make_app(engine)
    mount_playground(app)
    client = TestClient(app)
    health = client.get("/health").json()
    assert health["groups"] == ["a", "b"] and health["groups_total"] == 4
    # the playground's picker: the first names and the server's default group
    assert client.get("/playground/info").json()["groups"] == ["a", "b", "docs"]


def test_a_question_set_lists_the_documents_its_records_name_not_the_group(engine: GraphRoute) -> None:
    titles = {"d1": "Travel policy", "d2": "Security handbook"}
    engine.store.write("docs", [Node(id=i, label="Document", group="docs", doc_id=i, props={"title": t})
                                for i, t in titles.items()] + documents(MANY))
    app = make_app(engine)
    mount_playground(app)
    client = TestClient(app)
    config = {"route": "t_route"}
    r = client.post("/playground/ab/questions", json={
        "a": config, "b": config,
        "questions": [{"question": "Who approves travel requests?", "gold": ["Travel policy"], "answer": "the department head"}],
    })
    assert r.status_code == 200, r.text
    res = r.json()
    assert res["documents"] == ["Travel policy"]  # what the records name, not the group's 152 titles
    for side in ("a", "b"):
        (rec,) = res[side]
        assert [res["documents"][i] for i in rec["gold"]] == ["Travel policy"]
        assert res["documents"][rec["ranked"][0]] == "Travel policy"


def test_a_job_report_keeps_its_lists_short(tmp_path: Path) -> None:
    """A folder of many files that cannot be read: the job's report lists the first
    MAX_REPORT_ITEMS of them and counts the rest, and its error counts them all."""
    root = tmp_path / "root"
    root.mkdir()
    n = MAX_REPORT_ITEMS + 20
    for k in range(n):
        (root / f"blank-{k:03d}.md").write_text("  \n", encoding="utf-8")
    gr = GraphRoute(store=str(tmp_path / "store"), group="t")
    app = server.create_app(server.ServerConfig(upload_dir=tmp_path / "uploads", index_roots=[root], request_timeout_s=600), gr)
    try:
        with TestClient(app) as c:
            job = finished(c, {"group": "t", "paths": [str(root)]})
    finally:
        gr.close()
    assert job["state"] == "failed", job
    report = job["report"]
    assert len(report["failed"]) == MAX_REPORT_ITEMS and report["omitted"] == {"failed": 20}
    assert report["failed"][0]["path"] == "blank-000.md"
    assert f"{n} input(s) could not be read" in job["error"]


