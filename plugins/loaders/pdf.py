"""PDF loader (pdfplumber, offline): text with its place on the page.

Every word's rectangle comes from pdfplumber's own word extraction (``Page.extract_words``),
so a paragraph block carries one :class:`~graphroute.core.api.components.TextBox` per word, anchored
to the word's characters in the paragraph text; the skeleton turns them into one box per line
a sentence spans. Tables found by pdfplumber (ruled tables) become table blocks whose rows
keep their rectangles. Lines repeated at the top or bottom of most pages (running headers,
footers, page numbers) are dropped from the text and kept once as ``page_header`` metadata.
"""

from __future__ import annotations

import contextlib
import hashlib
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from graphroute.core.api.components import Block, Loader, SourceDocument, TextBox
from graphroute.core.errors import LoaderError
from graphroute.core.hookspecs import hookimpl

from .files import (
    FileLoaderParams,
    check_size,
    ensure_content,
    humanize_stem,
    make_doc,
    normalize_ws,
    promote_title,
    require,
)

_DIGITS = re.compile(r"\d+")
# words whose tops differ by at most this many points share a line (pdfplumber's own
# default y_tolerance for grouping characters into lines)
_LINE_TOLERANCE = 3.0


@dataclass
class _Line:
    top: float
    bottom: float
    size: float  # the most common font size of its words
    words: list[dict[str, Any]] = field(default_factory=list)
    bold: bool = False  # every word is set in a bold face


    @property
    def text(self) -> str:
        return " ".join(str(w["text"]) for w in self.words)


@dataclass
class _Table:
    top: float
    rows: list[list[str]]
    boxes: list[tuple[float, float, float, float]]  # one rectangle per row


def _lines(words: list[dict[str, Any]]) -> list[_Line]:
    """Words (in pdfplumber's reading order) grouped into lines."""
    lines: list[_Line] = []
    for w in words:
        text = str(w.get("text") or "").strip()
        if not text:
            continue
        top, bottom = float(w["top"]), float(w["bottom"])
        if lines and abs(top - lines[-1].top) <= _LINE_TOLERANCE and float(w["x0"]) >= float(lines[-1].words[-1]["x1"]) - 1:
            line = lines[-1]
            line.bottom = max(line.bottom, bottom)
        else:
            line = _Line(top=top, bottom=bottom, size=0.0)
            lines.append(line)
        line.words.append({**w, "text": text})
    for line in lines:
        sizes = [round(float(w.get("size") or 0), 1) for w in line.words]
        line.size = Counter(sizes).most_common(1)[0][0] if sizes else 0.0
        line.bold = all(_BOLD.search(str(w.get("fontname") or "")) for w in line.words)
    return lines


# Font names of bold faces ("Helvetica-Bold", "ABCDEF+Arial,Bold", "Roboto-SemiBold").
_BOLD = re.compile(r"bold|black|heavy", re.IGNORECASE)
_EMPHASIS_MAX_WORDS = 12


def _emphasis_heading(line: _Line, body_bold: bool) -> bool:
    """A short line set apart by emphasis rather than size: all bold in a body that is not, or
    all capitals. Without this, a body-size heading joins the paragraph below it and the first
    sentence of the section starts with the heading's words."""
    text = line.text
    if len(line.words) > _EMPHASIS_MAX_WORDS or text.endswith((".", ",", ";", ":", "!", "?")):
        return False
    letters = [c for c in text if c.isalpha()]
    if len(letters) < 2:
        return False
    return (line.bold and not body_bold) or (text.isupper() and len(line.words) <= 8)


def _paragraph(lines: list[_Line], page: int) -> Block:
    """One paragraph block from consecutive lines: words joined by single spaces, each word's
    rectangle anchored to its characters."""
    parts: list[str] = []
    boxes: list[TextBox] = []
    pos = 0
    for line in lines:
        for w in line.words:
            text = str(w["text"])
            if parts:
                pos += 1
            boxes.append(TextBox(pos, pos + len(text), page, float(w["x0"]), float(w["top"]), float(w["x1"]), float(w["bottom"])))
            parts.append(text)
            pos += len(text)
    return Block(kind="paragraph", text=" ".join(parts), page=page, boxes=boxes)


class PdfLoader(Loader):
    """PDF (.pdf) via pdfplumber, offline: paragraphs with word boxes, headings by font size (or a short bold or all-capitals line), ruled tables as rows."""

    name = "pdf"
    extensions = (".pdf",)
    Params = FileLoaderParams
    params: FileLoaderParams

    def load(self, path: Path) -> Iterator[SourceDocument]:
        pdfplumber = require(path, "pdfplumber", "pdfplumber", "pdf")
        check_size(path, self.params.max_file_mb)
        raw = path.read_bytes()
        if not raw.lstrip()[:5].startswith(b"%PDF"):
            raise LoaderError(f"{path}: not a PDF file (no %PDF header)")
        try:
            pdf = pdfplumber.open(path)
        except Exception as exc:  # pdfminer raises many different types on broken files
            raise LoaderError(f"{path}: unreadable PDF ({type(exc).__name__}: {exc})") from None
        pages: list[list[_Line]] = []
        tables: list[list[_Table]] = []
        title = ""
        try:
            meta_title = (pdf.metadata or {}).get("Title")
            if isinstance(meta_title, bytes):
                meta_title = meta_title.decode("utf-8", "replace")
            title = str(meta_title or "").strip()
            for page in pdf.pages:
                found = page.find_tables()
                page_tables = []
                for t in found:
                    extracted = t.extract()
                    kept = [
                        ([_clean(c) for c in row], r.bbox)
                        for row, r in zip(extracted, t.rows, strict=False)
                        if any(_clean(c) for c in row)
                    ]
                    if kept:
                        page_tables.append(_Table(float(t.bbox[1]), [r for r, _ in kept], [(float(b[0]), float(b[1]), float(b[2]), float(b[3])) for _, b in kept]))
                tables.append(page_tables)
                body = page
                for t in found:
                    body = body.outside_bbox(t.bbox)
                pages.append(_lines(body.extract_words(extra_attrs=["size", "fontname"])))
        except LoaderError:
            raise
        except Exception as exc:
            raise LoaderError(f"{path}: unreadable PDF ({type(exc).__name__}: {exc})") from None
        finally:
            # pdfplumber's close() walks the page tree again: on a broken file it raises the
            # parser's error a second time, which would replace the LoaderError above
            with contextlib.suppress(Exception):
                pdf.close()
        if not any(pages) and not any(tables):
            raise LoaderError(f"{path}: no text layer (scanned PDF?); run OCR first")
        blocks = self._blocks(pages, tables)
        if not title:
            title, blocks = promote_title(blocks, humanize_stem(path))
        ensure_content(path, blocks)
        digest = hashlib.md5(raw, usedforsecurity=False).hexdigest()
        yield make_doc(title, str(path), blocks, digest=digest, pages=len(pages))

    @staticmethod
    def _blocks(pages: list[list[_Line]], tables: list[list[_Table]]) -> list[Block]:
        """Paragraphs by vertical gaps, headings by font size, repeated page edges as headers."""
        # lines repeated at the top/bottom of most pages are page headers/footers (metadata)
        edge_count: Counter[str] = Counter()
        for lines in pages:
            edge_count.update({_DIGITS.sub("#", ln.text) for ln in (lines[:2] + lines[-2:])})
        repeated = {k for k, n in edge_count.items() if len(pages) >= 2 and n >= max(2, len(pages) // 2 + 1)}
        sizes = [ln.size for lines in pages for ln in lines if ln.size]
        body_size = sorted(sizes)[len(sizes) // 2] if sizes else 0.0
        heading_sizes = sorted({s for s in sizes if s >= body_size * 1.15}, reverse=True)
        # the body is bold when most lines of body size are (then bold says nothing)
        body_lines = [ln for lines in pages for ln in lines if ln.size == body_size]
        body_bold = sum(ln.bold for ln in body_lines) * 2 > len(body_lines)
        blocks: list[Block] = []
        headers_seen: set[str] = set()
        for pno, lines in enumerate(pages, start=1):
            items: list[tuple[float, _Line | _Table]] = [(ln.top, ln) for ln in lines]
            items += [(t.top, t) for t in tables[pno - 1]]
            items.sort(key=lambda it: it[0])
            para: list[_Line] = []
            line_h = 0.0
            for _, item in items:
                if isinstance(item, _Table):
                    _flush(para, blocks, pno)
                    blocks.append(Block(
                        kind="table", rows=item.rows, page=pno, text="\n".join(" | ".join(r) for r in item.rows),
                        boxes=[TextBox(i, i + 1, pno, *b) for i, b in enumerate(item.boxes)],
                    ))
                    continue
                text = item.text
                key = _DIGITS.sub("#", text)
                if key in repeated:
                    if key not in headers_seen:
                        headers_seen.add(key)
                        blocks.append(Block(kind="page_header", text=text, page=pno))
                    continue
                if item.size and item.size in heading_sizes and len(text) < 120 and not text.endswith("."):
                    _flush(para, blocks, pno)
                    blocks.append(Block(kind="heading", text=text, level=heading_sizes.index(item.size) + 1, page=pno))
                    continue
                if item.size and item.size <= body_size * 1.15 and _emphasis_heading(item, body_bold):
                    _flush(para, blocks, pno)
                    blocks.append(Block(kind="heading", text=text, level=len(heading_sizes) + 1, page=pno))
                    continue
                height = max(item.bottom - item.top, 1.0)
                line_h = line_h or height
                if para and item.top - para[-1].bottom > 0.8 * line_h:
                    _flush(para, blocks, pno)
                para.append(item)
            _flush(para, blocks, pno)
        return blocks


def _flush(para: list[_Line], blocks: list[Block], page: int) -> None:
    if para:
        blocks.append(_paragraph(para, page))
        para.clear()


def _clean(cell: Any) -> str:
    return normalize_ws(str(cell or ""))


@hookimpl
def register_loaders() -> list[type[Loader]]:
    return [PdfLoader]
