"""Group isolation and injection, on both stores, through the real Indexer and every shipped route.

Two small corpora go into two groups of one store: group A (Ashford) and group B (Bramley)
share entity names (Harbor Bridge, Maria Lopez, Northwind Trading) and near-duplicate
sentences, and every sentence of B names Bramley, which A never does. Every shipped route is
run for A with questions that B answers *better* (they name Bramley), so a leak through vector
search, PPR, entity or kNN edges would surface: every evidence, citation, context and answer
must come from A.

Injection: group B's *name*, a document title, section names and questions hold Cypher
(``'}) MATCH (n) DETACH DELETE n //``), YAML (``: - [ {``) and shell (``$(touch F); `touch F```)
metacharacters. They must come back verbatim, nothing may be deleted, and no file may appear.
The Neo4j cases are skipped when its server is unreachable (and fail in CI), like the
conformance suite.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from graphroute.core.api.models import QueryResult
from graphroute.core.api.store import GraphStore
from graphroute.core.config.route import list_routes
from graphroute.core.config.settings import Settings
from graphroute.core.engine import GraphRoute

from tests.conformance.conftest import open_backend

CYPHER = "'}) MATCH (n) DETACH DELETE n //"
YAML_BITS = ": - [ {"
# The *_llm routes extend offline ones with the same retrieval and need a model to answer;
# tests/llm runs them against the loopback server.
SHIPPED_ROUTES = sorted(
    name for name, path in list_routes().items() if path.parent.name == "routes" and not name.endswith("_llm")
)

A_DOCS = {
    "harbor.md": """# Harbor Bridge

## History

The Harbor Bridge in Ashford was designed by Maria Lopez in 1931.
Northwind Trading paid for the steel of the Harbor Bridge.

## Maintenance

The Harbor Bridge is painted every seven years by the city council of Ashford.
Maria Lopez trained the first painters of the bridge crew.
""",
    "ferry.md": """# Ashford Ferry

## Timetable

The Ashford ferry leaves from pier four at noon every day.
Northwind Trading runs the ferry kiosk on pier four.
""",
}
B_DOCS = {
    "harbor.md": """# Harbor Bridge

## History

The Harbor Bridge in Bramley was designed by Maria Lopez in 1931.
Northwind Trading paid for the steel of the Harbor Bridge in Bramley.

## Maintenance

The Harbor Bridge in Bramley is painted every seven years by the city council of Bramley.
Maria Lopez trained the first painters of the Bramley bridge crew.
""",
}
QUESTIONS = [
    "Who designed the Harbor Bridge in Bramley?",
    "Who paid for the steel of the Harbor Bridge in Bramley?",
    "How often is the Bramley bridge painted by the city council of Bramley?",
]


@dataclass
class Indexed:
    gr: GraphRoute
    store: GraphStore
    a: str
    b: str
    markers: list[Path]
    title: str
    sections: list[str]
    question: str
    counts: dict[str, dict[str, dict[str, int]]]


def _write(folder: Path, docs: dict[str, str]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in docs.items():
        (folder / name).write_text(text, encoding="utf-8")
    return folder


@pytest.fixture(scope="module", params=["embedded", "neo4j"])
def indexed(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Indexed]:
    store = open_backend(request.param, tmp_path_factory)
    root = tmp_path_factory.mktemp("iso")
    markers = [root / "pwned-1", root / "pwned-2", root / "pwned-3"]
    shell = f"$(touch {markers[0]}); `touch {markers[1]}`"
    title = f"Notes {CYPHER} {YAML_BITS} {shell}"
    sections = [f"Pier {CYPHER}", f"Kiosk {YAML_BITS} {shell}"]
    # HTML keeps backticks literally (Markdown would render `x` as code and drop them)
    inject_html = (
        f"<html><head><title>{title}</title></head><body>"
        f"<h2>{sections[0]}</h2><p>The Ashford ferry timetable is posted at the pier office.</p>"
        f"<h2>{sections[1]}</h2><p>The kiosk on pier four sells tickets for the Ashford ferry.</p>"
        "</body></html>"
    )
    a_dir = _write(root / "a", {**A_DOCS, "inject.html": inject_html})
    b_dir = _write(root / "b", B_DOCS)
    suffix = uuid.uuid4().hex[:8]
    a = f"iso-a-{suffix}"
    b = f"iso-b {CYPHER} {YAML_BITS} $(touch {markers[2]}) {suffix}"
    settings = Settings()
    gr = GraphRoute(store=store, group=a, settings=settings)
    try:
        for group, folder in ((a, a_dir), (b, b_dir)):
            report = gr.index([folder], group=group)
            assert report.failed == [] and report.indexed == len(list(folder.iterdir())), report.to_json()
        counts = {g: store.counts(g) for g in (a, b)}
        yield Indexed(gr, store, a, b, markers, title, sections, f"Where is the timetable {CYPHER} {YAML_BITS} {shell}?", counts)
    finally:
        for g in (a, b):
            store.delete_group(g)
        gr.close()


def node_ids(store: GraphStore, group: str) -> set[str]:
    return {n.id for n in store.iter_nodes(group)}


def assert_only_group_a(result: QueryResult, a_ids: set[str]) -> None:
    assert result.group.startswith("iso-a-")
    texts = [result.answer, result.context]
    for e in result.evidence:
        assert e.id in a_ids, f"{result.route}: evidence {e.id} is not a node of group A"
        texts += [e.text, e.document, e.section_path]
    for c in result.citations:
        assert c.evidence_id in a_ids, f"{result.route}: citation {c.evidence_id} is not a node of group A"
        texts += [c.text, c.document, c.section_path]
    for doc in result.ranking:
        assert doc in a_ids, f"{result.route}: ranked document {doc} is not in group A"
    leaked = [t for t in texts if "Bramley" in t]
    assert not leaked, f"{result.route} leaked group B text: {leaked[:2]}"


@pytest.mark.parametrize("route", SHIPPED_ROUTES)
def test_queries_for_a_never_see_b(indexed: Indexed, route: str) -> None:
    a_ids = node_ids(indexed.store, indexed.a)
    got_evidence = 0
    for q in QUESTIONS:
        result = indexed.gr.query(q, route=route, group=indexed.a)
        assert_only_group_a(result, a_ids)
        got_evidence += len(result.evidence)
    assert got_evidence > 0, f"{route} returned nothing for A at all: the test would prove nothing"


def test_b_really_holds_the_better_answers(indexed: Indexed) -> None:
    """Control: the same questions on B do retrieve Bramley text, so the A assertions can fail."""
    result = indexed.gr.query(QUESTIONS[0], route="route1s_sentence", group=indexed.b)
    assert any("Bramley" in e.text for e in result.evidence)
    assert result.group == indexed.b


def test_derived_edges_stay_inside_each_group(indexed: Indexed) -> None:
    for g in (indexed.a, indexed.b):
        ids = node_ids(indexed.store, g)
        edges = list(indexed.store.iter_edges(g))
        assert edges
        outside = [(e.src, e.type, e.dst) for e in edges if e.src not in ids or e.dst not in ids]
        assert not outside, outside[:3]
    # the near-duplicate sentences of A and B are never linked (kNN runs per group)
    a_rel = {e.type for e in indexed.store.iter_edges(indexed.a)}
    assert "NEXT" in a_rel


def test_injection_strings_are_stored_and_returned_verbatim(indexed: Indexed) -> None:
    store, a = indexed.store, indexed.a
    assert indexed.b in store.groups() and indexed.a in store.groups()  # the group name, verbatim
    titles = {n.props["title"] for n in store.iter_nodes(a, "Document")}
    assert indexed.title in titles
    paths = {str(n.props.get("path", "")) for n in store.iter_nodes(a, "Section")}
    for section in indexed.sections:
        assert any(p.endswith(section) for p in paths), (section, paths)

    result = indexed.gr.query(indexed.question, route="route1s_sentence", group=a)
    assert result.question == indexed.question
    # the evidence, not the answer: the injection words are names the corpus never uses, so
    # the route may answer "not found" - the documents and sections must still be found
    hit = [c for c in result.evidence if c.document == indexed.title]
    assert hit, [c.document for c in result.evidence]
    assert any(c.section_path.endswith(indexed.sections[0]) or c.section_path.endswith(indexed.sections[1]) for c in hit)

    for route in ("route2_local", "route5_unified"):  # NER seeds and PPR see the raw question
        r = indexed.gr.query(indexed.question, route=route, group=a)
        assert r.question == indexed.question


def test_injection_never_executes(indexed: Indexed) -> None:
    """After indexing and querying with the strings above, nothing was deleted or run."""
    for q in (indexed.question, CYPHER, f"{YAML_BITS} {CYPHER}"):
        for route in ("route1_vector", "route2_local"):
            indexed.gr.query(q, route=route, group=indexed.b)
    for g in (indexed.a, indexed.b):
        assert indexed.store.counts(g) == indexed.counts[g]
    assert not [m for m in indexed.markers if m.exists()]


def test_http_upload_titles_and_questions_round_trip_verbatim(tmp_path: Path) -> None:
    """POST /index writes uploads as Markdown with the title in front matter: a title that
    starts with a quote or holds YAML/Cypher/shell characters must come back unchanged.
    (Auth and the 413 body limit are covered by tests/server/test_api.py.)"""
    import time

    from fastapi.testclient import TestClient
    from graphroute.core.apps.serve.server import ServerConfig, create_app

    marker = tmp_path / "pwned"
    titles = [f"{CYPHER} {YAML_BITS} $(touch {marker}); `touch {marker}`", '"quoted title"', "it's: [a, {b}]"]
    group = f"http {CYPHER.replace('//', '--')}"  # no '/': a new group's name is a URL path segment
    gr = GraphRoute(store=str(tmp_path / "store"), group="default")
    app = create_app(ServerConfig(upload_dir=tmp_path / "uploads", request_timeout_s=600), gr)
    with TestClient(app) as client:
        docs = [{"title": t, "text": f"Ferry number {i} of the harbour leaves at {8 + i} o'clock from pier {i}."}
                for i, t in enumerate(titles)]
        job = client.post("/index", json={"group": group, "documents": docs}).json()
        deadline = time.monotonic() + 600
        while job["state"] in ("queued", "running"):
            assert time.monotonic() < deadline
            time.sleep(0.2)
            job = client.get(f"/jobs/{job['id']}").json()
        assert job["state"] == "succeeded", job
        assert {n.props["title"] for n in gr.store.iter_nodes(group, "Document")} == set(titles)
        question = f"When does ferry number 0 leave? {CYPHER} $(touch {marker})"
        r = client.post("/query", json={"question": question, "group": group, "route": "route1s_sentence"})
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["question"] == question and body["group"] == group
        assert titles[0] in {e["document"] for e in body["evidence"]}
    assert not marker.exists()
    gr.close()
