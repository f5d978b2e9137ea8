"""What Document Intelligence's prebuilt-layout model answers for a PDF the tests write.

The words' polygons are pdfplumber's word positions in inches (the service's unit for PDF),
so a test can check the loader's boxes against the PDF reader's own positions. The caller
says what each line is (title, heading, paragraph, table, figure caption, ...), which is what
the service's model would have recognised.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

INCH = 72.0


def _poly(x0: float, top: float, x1: float, bottom: float) -> list[float]:
    return [round(v / INCH, 4) for v in (x0, top, x1, top, x1, bottom, x0, bottom)]


def _union(rects: list[tuple[float, float, float, float]]) -> tuple[float, float, float, float]:
    return min(r[0] for r in rects), min(r[1] for r in rects), max(r[2] for r in rects), max(r[3] for r in rects)


class LayoutResult:
    """Builds an ``analyzeResult`` element by element, in reading order."""

    def __init__(self, pdf: Path) -> None:
        import pdfplumber

        with pdfplumber.open(pdf) as doc:
            self.page_words = [p.extract_words() for p in doc.pages]
            self.sizes = [(float(p.width), float(p.height)) for p in doc.pages]
        self.content = ""
        self.paragraphs: list[dict[str, Any]] = []
        self.tables: list[dict[str, Any]] = []
        self.figures: list[dict[str, Any]] = []
        self.kvps: list[dict[str, Any]] = []
        self.sections: list[list[str]] = [[]]  # sections[0] is the root
        self.words: list[list[dict[str, Any]]] = [[] for _ in self.page_words]
        self.lines: list[list[dict[str, Any]]] = [[] for _ in self.page_words]

    # ------------------------------------------------------------------ text
    def _line_words(self, page: int, text: str) -> list[dict[str, Any]]:
        """The pdfplumber words of ``page`` (1-based) that spell the line ``text``."""
        words = self.page_words[page - 1]
        n = len(text.split())
        for i in range(len(words) - n + 1):
            if " ".join(w["text"] for w in words[i : i + n]) == text:
                return words[i : i + n]
        raise ValueError(f"line {text!r} not found on page {page}")

    def _emit(self, page: int, lines: list[str]) -> tuple[dict[str, int], list[tuple[float, float, float, float]]]:
        """Append lines to the content (lines joined by newlines, as the service does); returns
        the span and each line's rectangle."""
        if self.content:
            self.content += "\n"
        start = len(self.content)
        rects = []
        for li, line in enumerate(lines):
            if li:
                self.content += "\n"
            line_start = len(self.content)
            for wi, w in enumerate(self._line_words(page, line)):
                if wi:
                    self.content += " "
                self.words[page - 1].append({
                    "content": w["text"], "polygon": _poly(w["x0"], w["top"], w["x1"], w["bottom"]), "confidence": 0.99,
                    "span": {"offset": len(self.content), "length": len(w["text"])},
                })
                self.content += w["text"]
            ws = self._line_words(page, line)
            rect = _union([(w["x0"], w["top"], w["x1"], w["bottom"]) for w in ws])
            rects.append(rect)
            self.lines[page - 1].append({"content": line, "polygon": _poly(*rect),
                                         "spans": [{"offset": line_start, "length": len(self.content) - line_start}]})
        return {"offset": start, "length": len(self.content) - start}, rects

    def paragraph(self, page: int, lines: list[str], role: str | None = None, section: int | None = 0) -> int:
        span, rects = self._emit(page, lines)
        para: dict[str, Any] = {"content": self.content[span["offset"] :], "spans": [span],
                                "boundingRegions": [{"pageNumber": page, "polygon": _poly(*_union(rects))}]}
        if role:
            para["role"] = role
        self.paragraphs.append(para)
        if section is not None:
            self.sections[section].append(f"/paragraphs/{len(self.paragraphs) - 1}")
        return len(self.paragraphs) - 1

    def section(self, parent: int = 0) -> int:
        self.sections.append([])
        self.sections[parent].append(f"/sections/{len(self.sections) - 1}")
        return len(self.sections) - 1

    # ------------------------------------------------------------------ structures
    def table(self, page: int, rows: list[list[str]], x0: float, top: float, col_w: list[float], row_h: float, section: int) -> None:
        """A ruled table drawn by pdfgen.grid_ops at (x0, top in PDF points from the top)."""
        cells = []
        start = len(self.content) + (1 if self.content else 0)
        for r, row in enumerate(rows):
            x = x0
            for c, text in enumerate(row):
                idx = self.paragraph(page, [text], section=None)
                rect = (x, top + r * row_h, x + col_w[c], top + (r + 1) * row_h)
                cells.append({
                    "kind": "columnHeader" if r == 0 else "content", "rowIndex": r, "columnIndex": c,
                    "content": text, "boundingRegions": [{"pageNumber": page, "polygon": _poly(*rect)}],
                    "spans": self.paragraphs[idx]["spans"], "elements": [f"/paragraphs/{idx}"],
                })
                x += col_w[c]
        whole = (x0, top, x0 + sum(col_w), top + len(rows) * row_h)
        self.tables.append({
            "rowCount": len(rows), "columnCount": len(rows[0]), "cells": cells,
            "boundingRegions": [{"pageNumber": page, "polygon": _poly(*whole)}],
            "spans": [{"offset": start, "length": len(self.content) - start}],
        })
        self.sections[section].append(f"/tables/{len(self.tables) - 1}")

    def figure(self, page: int, rect: tuple[float, float, float, float], caption: str, section: int) -> None:
        idx = self.paragraph(page, [caption], section=None)
        p = self.paragraphs[idx]
        self.figures.append({
            "id": f"{page}.1", "boundingRegions": [{"pageNumber": page, "polygon": _poly(*rect)}], "spans": p["spans"],
            "caption": {"content": caption, "boundingRegions": p["boundingRegions"], "spans": p["spans"],
                        "elements": [f"/paragraphs/{idx}"]},
        })
        self.sections[section].append(f"/figures/{len(self.figures) - 1}")

    def key_value(self, key: str, value: str) -> None:
        def element(text: str) -> dict[str, Any]:
            at = self.content.index(text)
            return {"content": text, "spans": [{"offset": at, "length": len(text)}]}

        self.kvps.append({"key": element(key), "value": element(value), "confidence": 0.9})

    def result(self) -> dict[str, Any]:
        pages = []
        for i, (w, h) in enumerate(self.sizes):
            pages.append({"pageNumber": i + 1, "angle": 0, "width": w / INCH, "height": h / INCH, "unit": "inch",
                          "spans": [], "words": self.words[i], "lines": self.lines[i]})
        return {
            "content": self.content, "pages": pages, "paragraphs": self.paragraphs, "tables": self.tables,
            "figures": self.figures, "keyValuePairs": self.kvps,
            "sections": [{"spans": [], "elements": els} for els in self.sections],
        }
