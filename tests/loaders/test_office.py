"""Word and spreadsheet loaders: structure kept, metadata kept out of the text, clear refusals."""

from __future__ import annotations

import datetime as dt
import sys
from pathlib import Path

import pytest
from graphroute.core.errors import LoaderError
from graphroute.core.index.skeleton import plan_document
from graphroute.plugins.loaders.sheets import CsvLoader, XlsxLoader
from graphroute.plugins.loaders.word import DocxLoader

from .docgen import write_docx, write_xlsx


def test_docx_headings_nest_lists_keep_order_tables_become_rows(tmp_path: Path) -> None:
    (doc,) = DocxLoader().load(write_docx(tmp_path / "travel_policy.docx"))
    assert doc.title == "Travel Policy"
    body = [(b.kind, b.text, b.level) for b in doc.blocks if b.kind in ("heading", "paragraph")]
    assert body == [
        ("heading", "Approvals", 1),
        ("paragraph", "Every trip abroad needs written approval from the regional director.", 0),
        ("heading", "Exceptions", 2),
        ("paragraph", "Emergency travel may be approved afterwards.", 0),
        ("paragraph", "First listed item about booking early.", 0),
        ("paragraph", "Second listed item about receipts.", 0),
        ("heading", "Allowances", 1),
        ("paragraph", "Allowances are reviewed every January.", 0),
    ]
    table = next(b for b in doc.blocks if b.kind == "table")
    assert table.rows == [["City", "Daily allowance"], ["Lisbon", "85 euros"], ["Oslo", "140 euros"]]
    # the table sits between the "Allowances" heading and the paragraph after it
    texts = [b.text for b in doc.blocks]
    assert texts.index("Allowances") < doc.blocks.index(table) < texts.index("Allowances are reviewed every January.")
    plan = plan_document(doc)
    assert [s.path for s in plan.sections] == [
        "Travel Policy", "Travel Policy > Approvals", "Travel Policy > Approvals > Exceptions", "Travel Policy > Allowances",
    ]
    rows = next(p for p in plan.paragraphs if p.kind == "table").rows
    assert rows == ["City: Lisbon | Daily allowance: 85 euros", "City: Oslo | Daily allowance: 140 euros"]
    # header, footer and author are metadata, never sentences
    assert plan.metadata["page_headers"] == ["Harborview Internal", "Page footer text"]
    assert plan.metadata["kvps"] == ["author: Facilities Office"]
    assert not any("Harborview Internal" in p.text for p in plan.paragraphs)


def test_docx_that_is_not_a_package_is_refused(tmp_path: Path) -> None:
    p = tmp_path / "old.docx"
    p.write_bytes(b"\xd0\xcf\x11\xe0 an old binary .doc renamed")
    with pytest.raises(LoaderError, match=r"not a Word \.docx file"):
        list(DocxLoader().load(p))
    p.write_bytes(b"PK\x03\x04 broken zip")
    with pytest.raises(LoaderError, match="unreadable Word document"):
        list(DocxLoader().load(p))


def test_missing_dependency_names_the_extra(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "docx", None)  # import docx raises ImportError
    monkeypatch.setitem(sys.modules, "openpyxl", None)
    with pytest.raises(LoaderError, match=r'pip install "graphroute\[docx\]"'):
        list(DocxLoader().load(tmp_path / "any.docx"))
    with pytest.raises(LoaderError, match=r'pip install "graphroute\[xlsx\]"'):
        list(XlsxLoader().load(tmp_path / "any.xlsx"))


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("prices.csv", "Product,Price,Stock\nWidget,12.50,40\n\nGadget,,7\n"),
        ("prices.tsv", "Product\tPrice\tStock\nWidget\t12.50\t40\nGadget\t\t7\n"),
        ("prices_eu.csv", "Product;Price;Stock\nWidget;12.50;40\nGadget;;7\n"),
    ],
)
def test_csv_rows_become_sentences_with_header_names(tmp_path: Path, name: str, text: str) -> None:
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    (doc,) = CsvLoader().load(p)
    rows = next(x for x in plan_document(doc).paragraphs if x.kind == "table").rows
    assert rows == ["Product: Widget | Price: 12.50 | Stock: 40", "Product: Gadget | Stock: 7"]


def test_csv_row_limit_and_bad_encoding_are_refused_with_the_reason(tmp_path: Path) -> None:
    p = tmp_path / "big.csv"
    p.write_text("a,b\n" + "".join(f"{i},{i * 2}\n" for i in range(20)), encoding="utf-8")
    assert len(next(iter(CsvLoader(CsvLoader.Params(max_rows=21)).load(p))).blocks[0].rows or []) == 21
    with pytest.raises(LoaderError, match=r"sheet 'big' has more than 20 rows.*max_rows"):
        list(CsvLoader(CsvLoader.Params(max_rows=20)).load(p))
    bad = tmp_path / "latin1.csv"
    bad.write_bytes("name,city\nJosé,Málaga\n".encode("latin-1"))
    with pytest.raises(LoaderError, match="not valid UTF-8"):
        list(CsvLoader().load(bad))


def test_workbook_sheets_are_sections_and_values_read_as_text(tmp_path: Path) -> None:
    p = write_xlsx(tmp_path / "price_sheet.xlsx", {
        "Hardware": [["Item", "Price", "Since"], ["Drill", 89.0, dt.datetime(2024, 3, 1)], [None, None, None], ["Saw", 45.5, None]],
        "Services": [["Service", "Rate"], ["Installation", 60]],
        "Empty": [],
    })
    (doc,) = XlsxLoader().load(p)
    plan = plan_document(doc)
    assert [s.path for s in plan.sections] == ["price sheet", "price sheet > Hardware", "price sheet > Services"]
    tables = [(x.section.title, x.rows) for x in plan.paragraphs]
    assert tables == [
        ("Hardware", ["Item: Drill | Price: 89 | Since: 2024-03-01", "Item: Saw | Price: 45.5"]),
        ("Services", ["Service: Installation | Rate: 60"]),
    ]
    assert doc.metadata["sheets"] == 2


def test_workbook_row_limit_names_the_sheet(tmp_path: Path) -> None:
    p = write_xlsx(tmp_path / "w.xlsx", {"Small": [["a"], [1]], "Large": [["n"], *[[i] for i in range(30)]]})
    with pytest.raises(LoaderError, match=r"sheet 'Large' has more than 25 rows"):
        list(XlsxLoader(XlsxLoader.Params(max_rows=25)).load(p))
    p2 = tmp_path / "renamed.xlsx"
    p2.write_text("not a workbook", encoding="utf-8")
    with pytest.raises(LoaderError, match=r"not an Excel \.xlsx workbook"):
        list(XlsxLoader().load(p2))


def test_a_docx_without_core_properties_is_titled_by_its_file_name(tmp_path: Path) -> None:
    # a package with no docProps/core.xml (some generators leave it out): python-docx fills
    # in its own placeholder properties, which are not the document's
    import re
    import zipfile

    import docx

    d = docx.Document()
    d.add_paragraph("Annual leave is requested through the staff portal.")
    full = tmp_path / "full.docx"
    d.save(str(full))
    bare = tmp_path / "leave_policy.docx"
    with zipfile.ZipFile(full) as zin, zipfile.ZipFile(bare, "w") as zout:
        for item in zin.infolist():
            data = zin.read(item.filename)
            if item.filename == "docProps/core.xml":
                continue
            if item.filename in ("_rels/.rels", "[Content_Types].xml"):
                data = re.sub(rb"<(Relationship|Override) [^>]*core[-.][^>]*/>", b"", data)
            zout.writestr(item, data)
    [doc] = DocxLoader().load(bare)
    assert doc.title == "leave policy"  # humanize_stem, as for every format
    assert not [b.text for b in doc.blocks if b.kind == "kvp"]  # no "author: python-docx"
