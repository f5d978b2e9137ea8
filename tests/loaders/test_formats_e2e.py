"""A folder of documents as people have them - a Word policy with a table, a CSV list, a
two-sheet workbook, a multi-page PDF and one damaged workbook that fails on its own - indexed
and queried through the command line; the PDF citation's page and boxes checked against
pdfplumber's own word positions, and the same boxes through the Python API and HTTP."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from tests.indexing.pdfgen import text_ops, write_pdf

from .docgen import write_docx, write_xlsx

GENERATOR = ["Fuel is delivered monthly. The backup generator is tested every",
             "second Tuesday by the night shift engineer."]
PROFILE = "name: lean\nsteps:\n  - use: sentence_knn\n"


def operations_pdf(path: Path) -> Path:
    """Two pages with a running header and a page-number footer; the fact on page 2 starts in
    the middle of a line and wraps onto the next."""
    header, footer = (72, 760, 9, "Harborview Operations Manual"), (72, 40, 9, "Page {} of 2")
    page1 = text_ops([header, (72, 720, 16, "Heating"), (72, 690, 11, "The boilers are serviced each autumn before the first frost."),
                      (footer[0], footer[1], footer[2], footer[3].format(1))])
    page2 = text_ops([header, (72, 720, 16, "Power"), (72, 690, 11, GENERATOR[0]), (72, 676, 11, GENERATOR[1]),
                      (footer[0], footer[1], footer[2], footer[3].format(2))])
    return write_pdf(path, [page1, page2])


@pytest.fixture(scope="module")
def indexed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    from graphroute.core.apps.cli.main import cli_app
    from graphroute.core.errors import EXIT_FILES_FAILED

    root = tmp_path_factory.mktemp("formats")
    docs = root / "docs"
    docs.mkdir()
    write_docx(docs / "travel_policy.docx")
    (docs / "suppliers.csv").write_text(
        "Part number,Part,Supplier\nA-100,Door hinge,Brightmetal\nB-220,Window latch,Corvo Industries\n", encoding="utf-8",
    )
    write_xlsx(docs / "price_list.xlsx", {
        "Hardware": [["Item", "Price"], ["Drill", 89], ["Saw", 45]],
        "Services": [["Service", "Hourly rate"], ["Chimney sweeping", 75], ["Gutter cleaning", 40]],
    })
    pdf = operations_pdf(docs / "operations.pdf")
    (docs / "damaged.xlsx").write_bytes(b"PK\x03\x04 a truncated workbook")  # fails alone
    (root / "lean.yaml").write_text(PROFILE, encoding="utf-8")
    env = {"GRAPHROUTE_CACHE": str(root / "cache")}
    store = str(root / "store")
    run = CliRunner().invoke(cli_app(), ["index", str(docs), "--store", store, "--group", "g", "--profile", str(root / "lean.yaml"), "--json"], env=env)
    assert run.exit_code == EXIT_FILES_FAILED, run.output  # damaged.xlsx could not be read, the rest was indexed
    report = json.loads(run.stdout[run.stdout.index("{"):])
    assert report["indexed"] == 4
    assert [(Path(f["path"]).name, "unreadable workbook" in f["reason"]) for f in report["failed"]] == [("damaged.xlsx", True)]
    return {"store": store, "env": env, "pdf": pdf}


def query(indexed: dict[str, Any], question: str) -> dict[str, Any]:
    from graphroute.core.apps.cli.main import cli_app

    res = CliRunner().invoke(
        cli_app(), ["query", question, "--store", indexed["store"], "--group", "g", "--route", "route1s_sentence", "--json"], env=indexed["env"],
    )
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout[res.stdout.index("{"):])  # type: ignore[no-any-return]


def cited(out: dict[str, Any], fact: str) -> dict[str, Any]:
    hits = [c for c in out["citations"] if fact in c["text"]]
    assert hits, (out["answer"], [c["text"] for c in out["citations"]])
    return hits[0]


@pytest.mark.parametrize(
    ("question", "fact", "document", "section"),
    [
        ("What is the daily allowance in Oslo?", "City: Oslo | Daily allowance: 140 euros", "Travel Policy", "Travel Policy > Allowances"),
        ("Who supplies the window latch?", "Part: Window latch | Supplier: Corvo Industries", "suppliers", "suppliers"),
        ("What is the hourly rate for chimney sweeping?", "Service: Chimney sweeping | Hourly rate: 75", "price list", "price list > Services"),
    ],
)
def test_a_fact_from_each_office_format_is_found(indexed: dict[str, Any], question: str, fact: str, document: str, section: str) -> None:
    c = cited(query(indexed, question), fact)
    assert c["document"] == document and c["section_path"] == section
    assert c["page"] is None and c["boxes"] == []  # no page geometry in these formats


def _line_box(words: list[dict[str, Any]], text: str) -> tuple[float, float, float, float]:
    n = len(text.split())
    i = next(i for i in range(len(words)) if " ".join(w["text"] for w in words[i : i + n]) == text)
    ws = words[i : i + n]
    return min(w["x0"] for w in ws), min(w["top"] for w in ws), max(w["x1"] for w in ws), max(w["bottom"] for w in ws)


def test_pdf_citation_has_the_page_and_one_box_per_line_of_the_sentence(indexed: dict[str, Any]) -> None:
    import pdfplumber

    out = query(indexed, "When is the backup generator tested?")
    c = cited(out, "The backup generator is tested every second Tuesday by the night shift engineer.")
    assert c["document"] == "operations" and c["page"] == 2
    with pdfplumber.open(indexed["pdf"]) as reader:
        words = reader.pages[1].extract_words()
    # the sentence starts after "Fuel is delivered monthly." on the first line, ends on the second
    expected = [_line_box(words, "The backup generator is tested every"), _line_box(words, GENERATOR[1])]
    got = [(b["x0"], b["top"], b["x1"], b["bottom"]) for b in c["boxes"]]
    assert [b["page"] for b in c["boxes"]] == [2, 2]
    assert got == [pytest.approx(e, abs=0.01) for e in expected]
    # the running header and the page numbers are not text
    assert not any("Harborview Operations Manual" in e["text"] or "Page 2 of 2" in e["text"] for e in out["evidence"])
    pdf_evidence = [e for e in out["evidence"] if e["document"] == "operations"]
    assert pdf_evidence and all(e["boxes"] and all(b["page"] in (1, 2) for b in e["boxes"]) for e in pdf_evidence)


def test_python_api_and_http_carry_the_same_boxes(indexed: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    from fastapi.testclient import TestClient
    from graphroute.core import GraphRoute
    from graphroute.core.api.models import Box
    from graphroute.core.apps.serve.server import ServerConfig, create_app

    monkeypatch.setenv("GRAPHROUTE_CACHE", indexed["env"]["GRAPHROUTE_CACHE"])
    question = "When is the backup generator tested?"
    cli = cited(query(indexed, question), "backup generator")["boxes"]
    gr = GraphRoute(store=indexed["store"], group="g")
    try:
        result = gr.query(question, route="route1s_sentence")
        api = next(c for c in result.citations if "backup generator" in c.text).boxes
        assert all(isinstance(b, Box) for b in api) and [b.model_dump() for b in api] == cli
        with TestClient(create_app(ServerConfig(), gr)) as http:
            res = http.post("/query", json={"question": question, "route": "route1s_sentence", "group": "g"})
        assert res.status_code == 200, res.text
        body = res.json()
        assert next(c for c in body["citations"] if "backup generator" in c["text"])["boxes"] == cli
        assert any(e["boxes"] for e in body["evidence"])
    finally:
        gr.close()
