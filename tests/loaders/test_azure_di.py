"""The Azure Document Intelligence loader: the real SDK against a loopback server speaking the
service's REST format (tests/servers/fake_docintel.py), mapped onto the skeleton."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from graphroute.core.errors import LoaderError
from graphroute.core.index.skeleton import plan_document
from graphroute.plugins.loaders.azure_di import AzureDocumentIntelligenceLoader

from tests.indexing.pdfgen import grid_ops, text_ops, write_pdf
from tests.servers.fake_docintel import FakeDocumentIntelligence, fake_docintel  # noqa: F401

from .di_result import LayoutResult

PARAGRAPH = ["The roof membrane was replaced in May by Northline Roofing. Its",
             "warranty runs for fifteen years from the day of handover."]
CAPTION = "Figure 1: Boiler room floor plan with the new valve marked."


def report_pdf(path: Path) -> Path:
    """Two pages: running header and footer, title, two sections, a table and a figure."""
    page1 = text_ops([
        (72, 760, 9, "Harborview Report"), (72, 720, 18, "Annual Maintenance Report"), (72, 690, 14, "Roof"),
        (72, 660, 11, PARAGRAPH[0]), (72, 646, 11, PARAGRAPH[1]), (72, 620, 11, "Inspector: Dana Ruiz"),
        (72, 40, 9, "Page 1"),
    ])
    page2 = text_ops([
        (72, 760, 9, "Harborview Report"), (72, 720, 14, "Boilers"),
        (72, 690, 11, "Boiler two failed its pressure test and awaits a new valve."),
        (72, 520, 10, CAPTION), (72, 40, 9, "Page 2"),
    ]) + "\n" + grid_ops(72, 660, [150, 150], [["Unit", "Status"], ["Boiler 1", "Passed"], ["Boiler 2", "Failed"]])
    return write_pdf(path, [page1, page2])


def layout_result(pdf: Path) -> dict:  # type: ignore[type-arg]
    r = LayoutResult(pdf)
    r.paragraph(1, ["Harborview Report"], role="pageHeader", section=None)
    r.paragraph(1, ["Annual Maintenance Report"], role="title")
    roof = r.section()
    r.paragraph(1, ["Roof"], role="sectionHeading", section=roof)
    r.paragraph(1, PARAGRAPH, section=roof)
    r.paragraph(1, ["Inspector: Dana Ruiz"], section=roof)
    r.key_value("Inspector:", "Dana Ruiz")
    r.paragraph(1, ["Page 1"], role="pageFooter", section=None)
    r.paragraph(2, ["Harborview Report"], role="pageHeader", section=None)
    boilers = r.section()
    r.paragraph(2, ["Boilers"], role="sectionHeading", section=boilers)
    r.paragraph(2, ["Boiler two failed its pressure test and awaits a new valve."], section=boilers)
    r.table(2, [["Unit", "Status"], ["Boiler 1", "Passed"], ["Boiler 2", "Failed"]], 72, 792 - 660, [150, 150], 20, boilers)
    r.figure(2, (72, 792 - 600, 400, 792 - 530), CAPTION, boilers)
    r.paragraph(2, ["Page 2"], role="pageFooter", section=None)
    return r.result()


def line_rect(words: list[dict], text: str) -> tuple[float, float, float, float]:  # type: ignore[type-arg]
    """The rectangle of the consecutive pdfplumber words that spell ``text``."""
    n = len(text.split())
    i = next(i for i in range(len(words)) if " ".join(w["text"] for w in words[i : i + n]) == text)
    ws = words[i : i + n]
    return min(w["x0"] for w in ws), min(w["top"] for w in ws), max(w["x1"] for w in ws), max(w["bottom"] for w in ws)


def make_loader(server: FakeDocumentIntelligence, **params: object) -> AzureDocumentIntelligenceLoader:
    return AzureDocumentIntelligenceLoader(AzureDocumentIntelligenceLoader.Params(
        endpoint=server.url, polling_interval=0.01, **params,  # type: ignore[arg-type]
    ))


@pytest.fixture
def di(fake_docintel: FakeDocumentIntelligence, monkeypatch: pytest.MonkeyPatch) -> FakeDocumentIntelligence:  # noqa: F811
    monkeypatch.setenv("AZURE_DOCUMENT_INTELLIGENCE_KEY", fake_docintel.key)
    return fake_docintel


def test_sdk_round_trip_maps_roles_tables_kvps_figures_and_boxes(di: FakeDocumentIntelligence, tmp_path: Path) -> None:
    import pdfplumber

    pdf = report_pdf(tmp_path / "report.pdf")
    di.analyze = lambda data, model_id: layout_result(pdf) if data == pdf.read_bytes() else {}
    di.running_polls = 2
    (doc,) = make_loader(di).load(pdf)

    # the SDK's wire traffic: one upload of the file, then polls until it succeeded
    post = next(r for r in di.requests if r.method == "POST")
    assert "/documentModels/prebuilt-layout:analyze" in post.path and "features=keyValuePairs" in post.path
    assert post.headers["content-type"] == "application/octet-stream" and post.body == pdf.read_bytes()
    assert sum(r.method == "GET" for r in di.requests) == 3

    assert doc.title == "Annual Maintenance Report"
    assert doc.metadata["pages"] == 2 and doc.metadata["parser"] == "azure-document-intelligence:prebuilt-layout"
    plan = plan_document(doc)
    assert [s.path for s in plan.sections] == [
        "Annual Maintenance Report", "Annual Maintenance Report > Roof", "Annual Maintenance Report > Boilers",
    ]
    assert plan.metadata["page_headers"] == ["Harborview Report", "Page 1", "Harborview Report", "Page 2"]
    assert plan.metadata["kvps"] == ["Inspector: Dana Ruiz"]
    by_kind = {(p.kind, p.section.title): p for p in plan.paragraphs}
    # table cells and the caption are read through their table and figure, not twice
    assert [p.kind for p in plan.paragraphs] == ["paragraph", "paragraph", "paragraph", "table", "figure_caption"]
    assert by_kind["table", "Boilers"].rows == ["Unit: Boiler 1 | Status: Passed", "Unit: Boiler 2 | Status: Failed"]
    assert by_kind["figure_caption", "Boilers"].text == CAPTION

    # word polygons (inches) come back as the PDF reader's word positions in points
    with pdfplumber.open(pdf) as reader:
        words = reader.pages[0].extract_words()
    para = next(p for p in plan.paragraphs if p.text.startswith("The roof"))
    assert para.text == " ".join(PARAGRAPH)
    first = next(b for b in para.boxes if para.text[b.start : b.end] == "Northline")
    w = next(w for w in words if w["text"] == "Northline")
    assert first.page == 1
    assert (first.x0, first.top, first.x1, first.bottom) == pytest.approx((w["x0"], w["top"], w["x1"], w["bottom"]), abs=0.01)
    # table rows keep the rectangle of their cells (the grid drawn at y = 660 from the bottom)
    row = next(b for b in doc.blocks if b.kind == "table").boxes or []
    assert [(b.start, b.page) for b in row] == [(0, 2), (1, 2), (2, 2)]
    assert (row[1].x0, row[1].top, row[1].x1, row[1].bottom) == pytest.approx((72, 152, 372, 172), abs=0.01)


def test_profile_selects_the_loader_and_citations_carry_its_boxes(di: FakeDocumentIntelligence, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import pdfplumber
    from graphroute.core.apps.cli.main import cli_app
    from typer.testing import CliRunner

    (tmp_path / "docs").mkdir()
    pdf = report_pdf(tmp_path / "docs" / "report.pdf")
    di.analyze = lambda data, model_id: layout_result(pdf)
    (tmp_path / "docs" / "notes.md").write_text("# Notes\n\nThe lobby lights are on a timer.\n", encoding="utf-8")
    profile = tmp_path / "azure.yaml"
    profile.write_text(
        "name: azure\nloaders:\n  - use: azure_document_intelligence\n"
        f"    with: {{endpoint: '{di.url}', extensions: [.pdf], polling_interval: 0.01}}\n"
        "steps:\n  - use: sentence_knn\n", encoding="utf-8",
    )
    monkeypatch.setenv("GRAPHROUTE_CACHE", str(tmp_path / "cache"))
    store = str(tmp_path / "store")
    run = CliRunner().invoke(cli_app(), ["index", str(tmp_path / "docs"), "--store", store, "--group", "g", "--profile", str(profile), "--json"])
    assert run.exit_code == 0, run.output
    report = json.loads(run.stdout[run.stdout.index("{"):])
    assert report["indexed"] == 2 and report["failed"] == []
    assert sum(r.method == "POST" for r in di.requests) == 1  # the PDF went to the service, the Markdown did not

    res = CliRunner().invoke(cli_app(), ["query", "Which unit failed the pressure test?", "--store", store, "--group", "g", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout[res.stdout.index("{"):])
    cited = next(c for c in out["citations"] if "Boiler two failed" in c["text"])
    assert cited["page"] == 2
    # every box is one line of the cited text as the PDF reader places it: the sentence's
    # line, a table row's cells, the caption's line
    with pdfplumber.open(pdf) as reader:
        words = reader.pages[1].extract_words()
    sentence = line_rect(words, "Boiler two failed its pressure test and awaits a new valve.")
    known = [sentence, (72, 152, 372, 172), (72, 172, 372, 192), line_rect(words, CAPTION)]
    boxes = [(b["x0"], b["top"], b["x1"], b["bottom"]) for b in cited["boxes"]]
    assert all(b["page"] == 2 for b in cited["boxes"]) and boxes[0] == pytest.approx(sentence, abs=0.01)
    assert all(any(b == pytest.approx(k, abs=0.01) for k in known) for b in boxes), boxes


def test_only_a_profile_that_names_it_sends_files_to_the_service(tmp_path: Path) -> None:
    from graphroute.core.config.index_profile import ComponentSpec, IndexProfile
    from graphroute.core.config.settings import Settings
    from graphroute.core.engine import open_store
    from graphroute.core.index.pipeline import Indexer
    from graphroute.core.registry import get_registry

    store = open_store(str(tmp_path / "s"))
    try:
        def loaders(profile: IndexProfile | str) -> list[str]:
            ix = Indexer(store, "g", registry=get_registry(), settings=Settings(), profile=profile)
            return [ld.name for ld in ix._loaders() if ld.accepts(Path("a.pdf"))]

        assert loaders("default") == ["pdf"]
        azure = ComponentSpec(use="azure_document_intelligence", **{"with": {"endpoint": "http://127.0.0.1:9"}})
        assert loaders(IndexProfile(name="a", loaders=[azure])) == ["azure_document_intelligence", "pdf"]
    finally:
        store.close()


def test_service_errors_are_per_file_with_the_reason(di: FakeDocumentIntelligence, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pdf = report_pdf(tmp_path / "r.pdf")
    monkeypatch.setenv("AZURE_DOCUMENT_INTELLIGENCE_KEY", "wrong")
    with pytest.raises(LoaderError, match=r"HTTP 401: Access denied"):
        list(make_loader(di).load(pdf))
    monkeypatch.setenv("AZURE_DOCUMENT_INTELLIGENCE_KEY", di.key)
    di.fail_with = {"code": "InvalidContent", "message": "The file is corrupted or format is unsupported."}
    with pytest.raises(LoaderError, match="corrupted or format is unsupported"):
        list(make_loader(di).load(pdf))
    with pytest.raises(LoaderError, match="needs `endpoint`"):
        list(AzureDocumentIntelligenceLoader().load(pdf))
