"""Where text sits on a page: boxes from the loaders to the citations.

Coordinates are **PDF points** (1/72 inch) with the origin at the **top-left** corner of the
page and y growing downwards: ``x0``/``x1`` from the left edge, ``top``/``bottom`` from the
top edge (pdfplumber's convention; Azure Document Intelligence's inches are multiplied by
72). Pages are numbered from 1.

Three shapes, one per layer:

* :class:`~graphroute.core.api.components.TextBox` - what a loader attaches to a :class:`~graphroute.core.components.Block`:
  a run of the block's characters (a word or a line) and its rectangle.
* a **layout** - what the index stores on Paragraph, Sentence and TextChunk nodes (JSON, so
  both stores keep it as is): a list of ``[start, end, page, x0, top, x1, bottom]`` rows, one
  per line a sentence spans, with ``start``/``end`` in the chunk's character frame (the frame
  of ``Evidence.char_offset``).
* :class:`~graphroute.core.api.models.Box` - what evidence and citations carry: one rectangle per
  line, no character offsets.

A citation that narrows evidence to some of its sentences keeps only the layout rows inside
the cited characters (:func:`boxes_in`), so a viewer can highlight exactly the cited text.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from graphroute.core.api.components import TextBox
from graphroute.core.api.models import Box, Evidence

LayoutRow = list[Any]  # [start, end, page, x0, top, x1, bottom]


def _same_line(a: Sequence[Any], b: Sequence[Any]) -> bool:
    """Two rows of ``[.., page, x0, top, x1, bottom]`` (the last five) lie on one line: same
    page and vertical extents overlapping by half the smaller height (a superscript or a
    larger word still counts, the next line down does not)."""
    pa, _, ta, _, ba = a[-5:]
    pb, _, tb, _, bb = b[-5:]
    if pa != pb:
        return False
    overlap = min(ba, bb) - max(ta, tb)
    return overlap >= 0.5 * max(min(ba - ta, bb - tb), 0.01)


def _rows_by_line(rows: Iterable[Sequence[Any]]) -> list[LayoutRow]:
    """Consecutive rows on one line merged into one row: the union of their characters and
    of their rectangles."""
    out: list[LayoutRow] = []
    for r in rows:
        s, e, page, x0, top, x1, bottom = r
        if out and _same_line(out[-1], r):
            last = out[-1]
            out[-1] = [min(last[0], s), max(last[1], e), page, min(last[3], x0), min(last[4], top),
                       max(last[5], x1), max(last[6], bottom)]
        else:
            out.append([s, e, page, x0, top, x1, bottom])
    return out


def line_rows(boxes: Sequence[TextBox], start: int, end: int, shift: int = 0) -> list[LayoutRow]:
    """The layout of characters ``[start, end)`` of a text whose runs are ``boxes``: one row
    per line, the rectangle of the runs inside the span, offsets moved by ``shift`` (into the
    chunk frame). Runs are expected in reading order, as the loaders give them."""
    inside = ((b.start, b.end, b.page, b.x0, b.top, b.x1, b.bottom) for b in boxes if b.start < end and b.end > start)
    rows = _rows_by_line(inside)
    return [[max(r[0], start) + shift, min(r[1], end) + shift, r[2], *(round(v, 2) for v in r[3:])] for r in rows]


def paragraph_boxes(text: str, boxes: Sequence[TextBox] | None) -> list[TextBox]:
    """A paragraph block's runs in the frame of its stripped text (the skeleton strips it)."""
    if not boxes:
        return []
    lead = len(text) - len(text.lstrip())
    return [TextBox(b.start - lead, b.end - lead, b.page, b.x0, b.top, b.x1, b.bottom) for b in boxes] if lead else list(boxes)


def table_boxes(boxes: Sequence[TextBox] | None, kept: Sequence[tuple[int, str]]) -> list[TextBox]:
    """A table block's row boxes in the frame of its linearised text: ``kept`` lists the
    (row index, linearised line) pairs the skeleton keeps, joined by newlines."""
    if not boxes:
        return []
    by_row: dict[int, list[TextBox]] = {}
    for b in boxes:
        by_row.setdefault(b.start, []).append(b)
    out: list[TextBox] = []
    pos = 0
    for row, line in kept:
        for b in by_row.get(row, ()):
            out.append(TextBox(pos, pos + len(line), b.page, b.x0, b.top, b.x1, b.bottom))
        pos += len(line) + 1
    return out


def boxes_in(layout: Sequence[Sequence[Any]] | None, start: int | None = None, end: int | None = None) -> list[Box]:
    """The boxes (one per line) of the layout rows overlapping ``[start, end)``; all rows
    when no span is given."""
    if not layout:
        return []
    rows = [r for r in layout if len(r) == 7 and (start is None or end is None or (r[0] < end and r[1] > start))]
    return [Box(page=int(r[2]), x0=float(r[3]), top=float(r[4]), x1=float(r[5]), bottom=float(r[6])) for r in _rows_by_line(rows)]


def layout_of(props: dict[str, Any], key: str = "layout") -> list[LayoutRow] | None:
    """A node's stored layout, or None when it has none (text from a format without
    geometry, or an index written before geometry was kept)."""
    value = props.get(key)
    return value if isinstance(value, list) and value else None


def cited_boxes(ev: Evidence, start: int, end: int) -> list[Box]:
    """The boxes of characters ``[start, end)`` of ``ev.text``: exact when the evidence keeps
    its layout in the chunk frame and its text verbatim (a whole chunk's text starts at 0),
    else all of the evidence's boxes."""
    layout = ev.metadata.get("layout")
    whole_chunk = ev.kind == "chunk" and ev.char_offset is None and ev.id == ev.chunk_id
    base = 0 if whole_chunk else ev.char_offset if ev.metadata.get("offset_frame") == "chunk" else None
    if layout and base is not None and not ev.metadata.get("text_stripped"):
        return boxes_in(layout, base + start, base + end) or list(ev.boxes)
    return list(ev.boxes)


__all__ = ["LayoutRow", "boxes_in", "cited_boxes", "layout_of", "line_rows", "paragraph_boxes", "table_boxes"]
