"""PDF geometry from the loader to the skeleton: word boxes, table row boxes, one layout row
per line a sentence spans, in the chunk's character frame (also when a long paragraph is
split into several chunks)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from graphroute.core.index.skeleton import ParseLimits, build_skeleton, plan_document
from graphroute.core.lib.layout import boxes_in
from graphroute.plugins.loaders.pdf import PdfLoader

from tests.indexing.pdfgen import grid_ops, text_ops, write_pdf

LINES = ["Rent is due on the first day of each month. Late payment of the rent",
         "incurs a fee of fifty dollars. The landlord repairs the heating within",
         "two days of a written request."]


def lease_pdf(path: Path) -> Path:
    page1 = text_ops([(72, 760, 9, "Harborview Lease"), (72, 720, 11, LINES[0]), (72, 706, 11, LINES[1]), (72, 692, 11, LINES[2])])
    page2 = text_ops([(72, 760, 9, "Harborview Lease"), (72, 720, 11, "Pets are allowed with a deposit of two hundred dollars.")])
    page2 += "\n" + grid_ops(72, 650, [150, 150], [["Fee", "Amount"], ["Late fee", "$50"], ["Pet deposit", "$200"]])
    return write_pdf(path, [page1, page2])


def split_sentences(texts: Sequence[str]) -> list[list[tuple[int, int]]]:
    """Sentence spans at '. ' (a stand-in for the spaCy segmenter)."""
    out = []
    for t in texts:
        spans, start = [], 0
        for m in re.finditer(r"\.(\s+|$)", t):
            spans.append((start, m.start() + 1))
            start = m.end()
        out.append(spans)
    return out


def rect(words: list[dict[str, Any]], first: str, last: str, line_top: float) -> tuple[float, float, float, float]:
    on_line = [w for w in words if abs(w["top"] - line_top) < 1]
    texts = [w["text"] for w in on_line]
    ws = on_line[texts.index(first) : texts.index(last) + 1]
    return ws[0]["x0"], min(w["top"] for w in ws), ws[-1]["x1"], max(w["bottom"] for w in ws)


@pytest.fixture
def words(tmp_path: Path) -> tuple[Path, list[list[dict[str, Any]]]]:
    import pdfplumber

    pdf = lease_pdf(tmp_path / "lease.pdf")
    with pdfplumber.open(pdf) as reader:
        return pdf, [p.extract_words() for p in reader.pages]


def test_loader_boxes_are_the_readers_word_positions(words: tuple[Path, list[list[dict[str, Any]]]]) -> None:
    pdf, pages = words
    (doc,) = PdfLoader().load(pdf)
    para = next(b for b in doc.blocks if b.kind == "paragraph")
    assert para.text == " ".join(LINES) and para.boxes is not None
    assert [para.text[b.start : b.end] for b in para.boxes] == " ".join(LINES).split()
    assert [(b.x0, b.top, b.x1, b.bottom) for b in para.boxes] == [(w["x0"], w["top"], w["x1"], w["bottom"]) for w in pages[0][2:]]
    table = next(b for b in doc.blocks if b.kind == "table")
    assert [(b.start, b.page, b.x0, b.top, b.x1, b.bottom) for b in table.boxes or []] == [
        (0, 2, 72, 142, 372, 162), (1, 2, 72, 162, 372, 182), (2, 2, 72, 182, 372, 202),
    ]
    assert [b.text for b in doc.blocks if b.kind == "page_header"] == ["Harborview Lease"]


@pytest.mark.parametrize("chunk_max_tokens", [512, 16])  # 16: the paragraph is split into pieces
def test_sentences_get_one_box_per_line_they_span(words: tuple[Path, list[list[dict[str, Any]]]], chunk_max_tokens: int) -> None:
    pdf, pages = words
    (doc,) = PdfLoader().load(pdf)
    plan = plan_document(doc)
    skel = build_skeleton(plan, split_sentences(plan.texts_to_segment()), "g", ParseLimits(chunk_max_tokens=chunk_max_tokens))
    assert skel.stats["paragraphs_split"] == (1 if chunk_max_tokens == 16 else 0)
    sentences = {n.props["text"]: n.props for n in skel.nodes if n.label == "Sentence"}
    chunks = {n.id: n.props for n in skel.nodes if n.label == "TextChunk"}
    p1 = pages[0]
    top = [next(w["top"] for w in p1 if w["text"] == first) for first in ("Rent", "incurs", "two")]

    late = sentences["Late payment of the rent incurs a fee of fifty dollars."]
    assert late["page"] == 1
    got = [tuple(r[3:]) for r in late["layout"]]
    assert got == [pytest.approx(rect(p1, "Late", "rent", top[0]), abs=0.01), pytest.approx(rect(p1, "incurs", "dollars.", top[1]), abs=0.01)]
    # the layout's character offsets are the sentence's span in its chunk's text
    chunk_text = chunks[late["chunk_id"]]["text"]
    start, end = late["chunk_char_offset"], late["chunk_char_offset"] + late["char_length"]
    assert chunk_text[start:end] == late["text"]
    assert late["layout"][0][0] == start and late["layout"][-1][1] == end
    # the chunk's layout holds the same rows, so a citation of the chunk narrows to them
    assert [b.model_dump() for b in boxes_in(chunks[late["chunk_id"]]["layout"], start, end)] == [
        b.model_dump() for b in boxes_in(late["layout"])
    ]
    repairs = sentences["The landlord repairs the heating within two days of a written request."]
    assert [tuple(r[3:]) for r in repairs["layout"]] == [
        pytest.approx(rect(p1, "The", "within", top[1]), abs=0.01), pytest.approx(rect(p1, "two", "request.", top[2]), abs=0.01),
    ]
    row = sentences["Fee: Pet deposit | Amount: $200"]
    assert row["page"] == 2 and [tuple(r[2:]) for r in row["layout"]] == [(2, 72, 182, 372, 202)]
    assert "Harborview Lease" not in " ".join(sentences)
