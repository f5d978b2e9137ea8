"""What a reader of an answer sees of a document's layout: a PDF heading set in bold or in
capitals at body size is a heading, not the start of the first sentence below it; HTML
navigation, footers and the site banner are not indexed; a PDF citation shows its page in
`graphroute query`'s human output."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from graphroute.core.apps.cli.main import main
from graphroute.core.engine import open_store
from graphroute.plugins.loaders.files import HtmlLoader
from graphroute.plugins.loaders.pdf import PdfLoader

from tests.indexing.pdfgen import text_ops, write_pdf


def handbook(path: Path) -> Path:
    """Two pages; body text at 11 pt, one heading in bold and one in capitals at the same size."""
    page1 = "\n".join([
        text_ops([(72, 720, 18, "Site Handbook")]),
        text_ops([(72, 690, 11, "Safety Rules")], font="F2"),
        text_ops([(72, 676, 11, "All visitors must wear a helmet on site."), (72, 662, 11, "The site office opens at eight.")]),
    ])
    page2 = text_ops([(72, 720, 11, "OPENING HOURS"), (72, 706, 11, "The quarry gate closes at six in the evening.")])
    return write_pdf(path, [page1, page2])


def test_pdf_emphasis_headings_are_headings(tmp_path: Path) -> None:
    doc = next(iter(PdfLoader().load(handbook(tmp_path / "handbook.pdf"))))
    kinds = [(b.kind, b.text, b.page) for b in doc.blocks]
    assert ("heading", "Safety Rules", 1) in kinds and ("heading", "OPENING HOURS", 2) in kinds
    paragraphs = [b.text for b in doc.blocks if b.kind == "paragraph"]
    assert paragraphs == ["All visitors must wear a helmet on site. The site office opens at eight.",
                          "The quarry gate closes at six in the evening."]


def test_pdf_body_in_bold_is_not_all_headings(tmp_path: Path) -> None:
    body = text_ops([(72, 700 - 14 * i, 11, f"Bold body line {i} without an end") for i in range(6)], font="F2")
    doc = next(iter(PdfLoader().load(write_pdf(tmp_path / "bold.pdf", [body]))))
    assert [b.kind for b in doc.blocks if b.kind != "title"] == ["paragraph"]  # bold is the body here


SITE = """<html><head><title>Harbour fees</title></head><body>
<header><a href="/">Port of Saltmarsh</a><nav><a href="/a">Home</a> <a href="/b">Contact us</a></nav></header>
<div role="search"><p>Search the site</p></div>
<main><article>
<header><h1>Harbour fees</h1><p>Updated in March by the harbour office.</p></header>
<p>Mooring costs twelve pounds a night for boats under ten metres.</p>
<aside><p>Winter moorings are half price.</p></aside>
<footer><p>Share this article</p></footer>
</article></main>
<footer><p>Copyright Port of Saltmarsh. Cookie settings.</p></footer>
</body></html>"""


def test_html_page_furniture_is_not_indexed(tmp_path: Path) -> None:
    page = tmp_path / "fees.html"
    page.write_text(SITE, encoding="utf-8")
    doc = next(iter(HtmlLoader().load(page)))
    text = " ".join(b.text for b in doc.blocks)
    for furniture in ("Contact us", "Port of Saltmarsh", "Search the site", "Copyright", "Share this article"):
        assert furniture not in text, furniture
    for content in ("Updated in March", "Mooring costs twelve pounds", "Winter moorings are half price"):
        assert content in text, content


def test_html_header_of_a_page_without_main_is_kept(tmp_path: Path) -> None:
    page = tmp_path / "plain.html"
    page.write_text("<html><body><header><h1>Ferry notes</h1></header><p>The ferry runs hourly.</p>"
                    "<footer>Printed from the intranet</footer></body></html>", encoding="utf-8")
    doc = next(iter(HtmlLoader().load(page)))
    assert doc.title == "Ferry notes" and "Printed" not in " ".join(b.text for b in doc.blocks)


def test_query_output_shows_the_pdf_page_and_clean_sentences(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    handbook(docs / "handbook.pdf")
    profile = tmp_path / "lean.yaml"
    profile.write_text(yaml.safe_dump({"name": "lean", "steps": []}), encoding="utf-8")
    monkeypatch.setenv("GRAPHROUTE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("GRAPHROUTE_PROGRESS", "0")
    monkeypatch.setenv("COLUMNS", "300")
    store = str(tmp_path / "store")
    main(["index", str(docs), "--store", store, "--group", "g", "--profile", str(profile)])
    s = open_store(store)
    try:
        sentences = {n.props["text"] for n in s.iter_nodes("g", "Sentence")}
    finally:
        s.close()
    assert "The quarry gate closes at six in the evening." in sentences
    assert not any(t.startswith(("Safety Rules", "OPENING HOURS")) for t in sentences), sentences
    capsys.readouterr()
    main(["query", "When does the quarry gate close?", "--store", store, "--group", "g", "--route", "route1_vector"])
    out = capsys.readouterr().out
    assert "[1] Site Handbook > OPENING HOURS, p. 2" in out, out
