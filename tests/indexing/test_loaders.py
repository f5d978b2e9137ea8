"""Loaders: structure of each format, and a clear LoaderError for every kind of bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from graphroute.core.errors import LoaderError
from graphroute.plugins.loaders.files import (
    HtmlLoader,
    JsonCorpusLoader,
    MarkdownLoader,
    TextLoader,
)
from graphroute.plugins.loaders.pdf import PdfLoader

from .pdfgen import grid_ops, text_ops, write_pdf


def kinds(doc) -> list[tuple[str, str, int]]:  # type: ignore[no-untyped-def]
    return [(b.kind, b.text, b.level) for b in doc.blocks]


def test_markdown_headings_become_levels_and_single_h1_is_title(tmp_path: Path) -> None:
    p = tmp_path / "lease.md"
    p.write_text(
        "# Lease\n\nIntro text that is\nhard wrapped.\n\n## Rent\n\nRent is **due** on the first.\n\n"
        "### Late fees\n\n- A late fee of $50 applies.\n- Interest accrues daily.\n\n"
        "| Item | Amount |\n|---|---|\n| Rent | $900 |\n\n```\ncode is skipped\n```\n",
        encoding="utf-8",
    )
    (doc,) = MarkdownLoader().load(p)
    assert doc.title == "Lease"
    ks = kinds(doc)
    assert ks[0] == ("title", "Lease", 0)
    assert ("paragraph", "Intro text that is hard wrapped.", 0) in ks
    assert ("heading", "Rent", 2) in ks and ("heading", "Late fees", 3) in ks
    assert ("paragraph", "Rent is due on the first.", 0) in ks  # inline markup stripped
    assert ("paragraph", "A late fee of $50 applies.", 0) in ks  # list items are paragraphs
    table = next(b for b in doc.blocks if b.kind == "table")
    assert table.rows == [["Item", "Amount"], ["Rent", "$900"]]
    assert not any("code is skipped" in b.text for b in doc.blocks)
    assert doc.source == str(p) and len(doc.content_hash) == 32


def test_text_title_line_and_paragraphs(tmp_path: Path) -> None:
    p = tmp_path / "notes_2024.txt"
    p.write_text("Tenant Handbook\n\nFirst paragraph here.\nStill first.\n\nSecond paragraph.", encoding="utf-8")
    (doc,) = TextLoader().load(p)
    assert doc.title == "Tenant Handbook"
    assert [b.text for b in doc.blocks if b.kind == "paragraph"] == ["First paragraph here. Still first.", "Second paragraph."]
    p2 = tmp_path / "plain_notes.txt"
    p2.write_text("Only one paragraph, ending with a period.", encoding="utf-8")
    (doc2,) = TextLoader().load(p2)
    assert doc2.title == "plain notes"


def test_text_headings_are_sections_not_sentences(tmp_path: Path) -> None:
    p = tmp_path / "handbook.txt"
    p.write_text(
        "Staff Handbook\n\n"
        "Annual leave\n\nEveryone gets 27 days of annual leave a year.\n\n"
        "Sick leave\nReport sickness to your line manager before 10:00 on the first day.\n\n"
        "## Expenses\n\nClaims are paid monthly.\n\n"
        "Our policies are reviewed every year by the people team and\npublished on the intranet.\n\n"
        "By Ann Writer, People Team\n\nContact us: people@example.com\n\n"
        "- Bring your badge\n\nThe office opens at eight.\n\n"
        "Last updated 2024",
        encoding="utf-8",
    )
    (doc,) = TextLoader().load(p)
    assert doc.title == "Staff Handbook"
    assert kinds(doc) == [
        ("title", "Staff Handbook", 0),
        ("heading", "Annual leave", 2),
        ("paragraph", "Everyone gets 27 days of annual leave a year.", 0),
        ("heading", "Sick leave", 2),
        ("paragraph", "Report sickness to your line manager before 10:00 on the first day.", 0),
        ("heading", "Expenses", 2),
        ("paragraph", "Claims are paid monthly.", 0),
        # a hard-wrapped paragraph's short first line, a byline, a line ending in ":", a list
        # item and a short last line are not headings
        ("paragraph", "Our policies are reviewed every year by the people team and published on the intranet.", 0),
        ("paragraph", "By Ann Writer, People Team", 0),
        ("paragraph", "Contact us: people@example.com", 0),
        ("paragraph", "- Bring your badge", 0),
        ("paragraph", "The office opens at eight.", 0),
        ("paragraph", "Last updated 2024", 0),
    ]


def test_html_headings_paragraphs_tables_and_kvps(tmp_path: Path) -> None:
    p = tmp_path / "inv.html"
    p.write_text(
        "<html><head><title>Invoice 7</title><script>var x = 'no';</script></head><body>"
        "<h1>Invoice 7</h1><p>Issued to <b>Acme</b> on May 1.</p>"
        "<dl><dt>Due</dt><dd>June 1</dd></dl>"
        "<h2>Items</h2><table><tr><th>Item</th><th>Cost</th></tr><tr><td>Paint</td><td>$40</td></tr></table>"
        "<div>Trailing <span>div text</span></div></body></html>",
        encoding="utf-8",
    )
    (doc,) = HtmlLoader().load(p)
    assert doc.title == "Invoice 7"
    ks = kinds(doc)
    assert ("kvp", "Due: June 1", 0) in ks
    assert ("title", "Invoice 7", 1) in ks
    assert ("paragraph", "Issued to Acme on May 1.", 0) in ks
    assert ("heading", "Items", 2) in ks
    assert ("paragraph", "Trailing div text", 0) in ks
    assert next(b for b in doc.blocks if b.kind == "table").rows == [["Item", "Cost"], ["Paint", "$40"]]
    assert not any("var x" in b.text for b in doc.blocks)


def test_deeply_nested_html_does_not_crash(tmp_path: Path) -> None:
    depth = 20_000  # far beyond Python's recursion limit
    p = tmp_path / "deep.html"
    p.write_text("<html><body>" + "<div>" * depth + "<p>Deep inside the markup lives one sentence.</p>" + "</div>" * depth + "</body></html>", encoding="utf-8")
    (doc,) = HtmlLoader().load(p)
    assert [b.text for b in doc.blocks if b.kind == "paragraph"] == ["Deep inside the markup lives one sentence."]


def test_pdf_text_tables_headings_and_page_headers(tmp_path: Path) -> None:
    page1 = text_ops([
        (72, 740, 18, "Lease Summary"), (72, 700, 11, "The tenant pays rent monthly to the landlord."),
        (72, 686, 11, "Late payments incur a fee of five percent."), (72, 40, 9, "Harborview confidential"),
    ]) + "\n" + grid_ops(72, 600, [150, 150], [["Item", "Amount"], ["Rent", "$1,200"], ["Deposit", "$2,400"]])
    page2 = text_ops([(72, 740, 14, "Utilities"), (72, 700, 11, "Utilities are paid by the tenant directly."), (72, 40, 9, "Harborview confidential")])
    p = write_pdf(tmp_path / "lease.pdf", [page1, page2])
    (doc,) = PdfLoader().load(p)
    assert doc.title == "Lease Summary"
    paras = [(b.text, b.page) for b in doc.blocks if b.kind == "paragraph"]
    assert ("The tenant pays rent monthly to the landlord. Late payments incur a fee of five percent.", 1) in paras
    assert ("Utilities are paid by the tenant directly.", 2) in paras
    table = next(b for b in doc.blocks if b.kind == "table")
    assert table.rows == [["Item", "Amount"], ["Rent", "$1,200"], ["Deposit", "$2,400"]]
    assert any(b.kind == "heading" and b.text == "Utilities" for b in doc.blocks)
    # the repeated footer is metadata, never a paragraph
    assert [b.kind for b in doc.blocks if b.text == "Harborview confidential"] == ["page_header"]


def test_pdf_without_text_layer_is_refused(tmp_path: Path) -> None:
    p = write_pdf(tmp_path / "scan.pdf", ["0 0 1 rg 72 72 200 200 re f"])
    with pytest.raises(LoaderError, match=r"no text layer \(scanned PDF\?\)"):
        list(PdfLoader().load(p))


def test_broken_pdf_is_refused(tmp_path: Path) -> None:
    p = tmp_path / "broken.pdf"
    p.write_bytes(b"%PDF-1.4\nthis is not really a pdf\n")
    with pytest.raises(LoaderError, match="PDF"):
        list(PdfLoader().load(p))


def test_json_corpus_one_document_per_entry(tmp_path: Path) -> None:
    p = tmp_path / "corpus.json"
    p.write_text(json.dumps([
        {"title": "Alpha", "text": "Alpha is a town in Sweden."},
        {"title": "Beta", "text": "   "},
        {"title": "Gamma", "text": "Gamma rays are energetic.\n\nThey come from space."},
    ]), encoding="utf-8")
    loader = JsonCorpusLoader()
    docs = list(loader.load(p))
    assert [(d.title, d.source) for d in docs] == [("Alpha", f"{p}#0"), ("Gamma", f"{p}#2")]
    assert [b.text for b in docs[1].blocks] == ["Gamma rays are energetic.", "They come from space."]
    assert docs[0].content_hash != docs[1].content_hash
    assert loader.take_warnings() == ["entry 1: empty 'text'; left out"]


def test_json_corpus_names_each_entry_it_leaves_out(tmp_path: Path) -> None:
    p = tmp_path / "corpus.json"
    p.write_text(json.dumps([
        {"title": "Alpha", "text": "Alpha is a town in Sweden."}, "a bare string", {"title": "No text"},
        {"text": ["a", "list"]}, None, {"text": ""},
    ]), encoding="utf-8")
    loader = JsonCorpusLoader()
    assert [d.source for d in loader.load(p)] == [f"{p}#0"]
    assert loader.take_warnings() == [
        "entry 1: not a {title, text} object but str; left out",
        "entry 2: no 'text' field; left out",
        "entry 3: 'text' is not a string but list; left out",
        "entry 4: not a {title, text} object but null; left out",
        "entry 5: empty 'text'; left out",
    ]
    assert loader.take_warnings() == []  # taken once
    p.write_text(json.dumps([{"text": " "}, "x"]), encoding="utf-8")
    with pytest.raises(LoaderError, match="no entry has text"):
        list(loader.load(p))
    assert loader.take_warnings() == []  # a failed file: its reason, not the entries' warnings


def test_jsonl_corpus_reports_the_line_of_the_file_and_reads_the_other_lines(tmp_path: Path) -> None:
    p = tmp_path / "corpus.jsonl"
    lines = ['{"title": "Alpha", "text": "Alpha is a town in Sweden."}', "",
             '{"title": "Beta", "text": "Beta is a letter."}', "not json", '{"title": "Gamma", "text": "Gamma rays."}']
    p.write_text("\n".join(lines) + "\n", encoding="utf-8")
    loader = JsonCorpusLoader()
    docs = list(loader.load(p))
    # ids count the non-empty lines, the bad one included, so mending it moves no other id
    assert [(d.title, d.source) for d in docs] == [("Alpha", f"{p}#0"), ("Beta", f"{p}#1"), ("Gamma", f"{p}#3")]
    assert loader.take_warnings() == ["invalid JSON (line 4, column 1: Expecting value); left out"]
    p.write_text('\n{"title": "Alpha"\n', encoding="utf-8")  # no line is valid JSON: the file fails
    with pytest.raises(LoaderError, match=r"invalid JSON \(line 2, column 18: Expecting ',' delimiter\)"):
        list(loader.load(p))


def test_json_corpus_reads_markdown_entries_only_when_asked(tmp_path: Path) -> None:
    p = tmp_path / "corpus.json"
    text = "Applies to all staff.\n\n## Approval\n\nAsk your manager.\n\n- any `international` trip, and\n- any trip above 2,000."
    p.write_text(json.dumps([{"title": "Travel Policy", "text": text}]), encoding="utf-8")
    (plain,) = JsonCorpusLoader().load(p)
    assert [b.kind for b in plain.blocks] == ["paragraph"] * 4
    assert plain.blocks[1].text == "## Approval"
    (md,) = JsonCorpusLoader(JsonCorpusLoader.Params(markdown=True)).load(p)
    assert kinds(md) == [
        ("paragraph", "Applies to all staff.", 0),
        ("heading", "Approval", 2),
        ("paragraph", "Ask your manager.", 0),
        ("paragraph", "any international trip, and", 0),
        ("paragraph", "any trip above 2,000.", 0),
    ]


@pytest.mark.parametrize(
    ("name", "data", "reason"),
    [
        ("empty.md", b"", "empty file"),
        ("blank.txt", b"  \n\n \t", "empty file"),
        ("image.txt", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "binary file"),
        ("garbled.txt", bytes(range(128, 256)) * 16, "not text in any encoding"),
        ("bad.json", b"[{\"title\": 1,", "invalid JSON"),
        ("shape.json", b"{\"a\": 1}", "expected a non-empty JSON list"),
        ("headings.md", b"# Only\n## Headings\n", "no text content"),
    ],
)
def test_bad_input_gets_a_clear_reason(tmp_path: Path, name: str, data: bytes, reason: str) -> None:
    p = tmp_path / name
    p.write_bytes(data)
    loader = {".md": MarkdownLoader, ".txt": TextLoader, ".json": JsonCorpusLoader}[p.suffix]()
    with pytest.raises(LoaderError, match=reason) as info:
        list(loader.load(p))
    assert str(p) in str(info.value)


def test_file_over_max_mb_is_refused(tmp_path: Path) -> None:
    p = tmp_path / "big.txt"
    p.write_text("A sentence that repeats. " * 50_000, encoding="utf-8")  # ~1.2 MB
    with pytest.raises(LoaderError, match=r"over the limit of 1 MB"):
        list(TextLoader(TextLoader.Params(max_file_mb=1)).load(p))
    assert list(TextLoader(TextLoader.Params(max_file_mb=2)).load(p))
