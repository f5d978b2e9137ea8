"""Azure AI Document Intelligence as a loader (the reference system's parser), through the
official SDK (``azure-ai-documentintelligence``).

The file is sent to the service's ``analyze`` operation (``prebuilt-layout`` by default), the
SDK polls the ``Operation-Location`` it answers with, and the ``analyzeResult`` is mapped onto
the same blocks every loader produces:

* paragraphs in reading order, each with its words' rectangles (polygons reduced to their
  bounding box, inches turned into PDF points), so sentences get one box per line like PDF;
* paragraph roles: ``title`` -> the document title, ``sectionHeading`` -> a section whose
  level is its depth in the service's section tree, ``pageHeader`` / ``pageFooter`` /
  ``pageNumber`` -> page-header metadata (never sentences), ``footnote`` -> a paragraph;
* tables -> table blocks (first row = header, a row-spanning cell repeated in each row it
  spans) whose rows keep their rectangles; the table's caption is a paragraph before it;
* key-value pairs (``features: [keyValuePairs]``) -> ``kvp`` metadata;
* figures: the caption becomes a ``figure_caption`` sentence; text inside the figure is dropped.

Selected by the index profile only, never by file extension alone (it sends your files to a
service)::

    loaders:
      - use: azure_document_intelligence
        with: {endpoint: "https://<resource>.cognitiveservices.azure.com", extensions: [.pdf]}

The key is read from the environment variable named by ``api_key_env``; without it the SDK
authenticates with ``azure-identity``'s DefaultAzureCredential when that is installed.
"""

from __future__ import annotations

import bisect
import os
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, ClassVar

from graphroute.core.api.components import Block, Loader, SourceDocument, TextBox
from graphroute.core.errors import LoaderError
from graphroute.core.hookspecs import hookimpl
from pydantic import Field

from .files import (
    FileLoaderParams,
    check_size,
    ensure_content,
    file_md5,
    humanize_stem,
    make_doc,
    normalize_ws,
    require,
)

POINTS_PER_INCH = 72.0
_HEADER_ROLES = {"pageHeader", "pageFooter", "pageNumber"}
_ELEMENT = re.compile(r"^/(paragraphs|sections|tables|figures)/(\d+)$")
_BREAKS = re.compile(r"[\r\n\t\f\v]")


def _flat(text: str | None) -> str:
    """An element's content with its line breaks as spaces: same length, so the words'
    offsets into it still hold."""
    return _BREAKS.sub(" ", text or "")


class AzureDIParams(FileLoaderParams):
    endpoint: str = Field("", description="the resource endpoint, e.g. `https://NAME.cognitiveservices.azure.com` (required)")
    api_key_env: str = Field(
        "AZURE_DOCUMENT_INTELLIGENCE_KEY",
        description="environment variable holding the key; unset: azure-identity's DefaultAzureCredential",
    )
    model_id: str = Field("prebuilt-layout", description="the analysis model")
    features: list[str] = Field(default_factory=lambda: ["keyValuePairs"], description="optional analysis features")
    locale: str | None = Field(None, description="locale hint, e.g. `en-US`")
    extensions: list[str] = Field(
        default_factory=lambda: [".pdf", ".jpg", ".jpeg", ".png", ".bmp", ".tif", ".tiff", ".heif", ".docx", ".xlsx", ".pptx", ".html"],
        description="file types this loader takes (ahead of the built-in loaders)",
    )
    polling_interval: float = Field(1.0, gt=0, description="seconds between polls of the analyze operation when the service gives no Retry-After")
    timeout_s: float = Field(600.0, gt=0, description="give up on one file after this many seconds")


def _rect(polygon: Sequence[float] | None, scale: float) -> tuple[float, float, float, float] | None:
    """A polygon ``[x1, y1, ..., x4, y4]`` as its bounding rectangle (x0, top, x1, bottom)."""
    if not polygon or len(polygon) < 4:
        return None
    xs, ys = polygon[0::2], polygon[1::2]
    return min(xs) * scale, min(ys) * scale, max(xs) * scale, max(ys) * scale


class _Result:
    """Index over one ``AnalyzeResult``: page scales and the words ordered by offset."""

    def __init__(self, result: Any) -> None:
        self.r = result
        self.scale: dict[int, float] = {}
        words: list[tuple[int, int, int, tuple[float, float, float, float]]] = []
        for page in result.pages or []:
            # inches (PDF, Office) -> points; images are measured in pixels, kept as 1 px = 1 pt
            scale = POINTS_PER_INCH if (page.unit or "inch") == "inch" else 1.0
            self.scale[page.page_number] = scale
            for w in page.words or []:
                rect = _rect(w.polygon, scale)
                if rect is not None and w.span is not None:
                    words.append((w.span.offset, w.span.offset + w.span.length, page.page_number, rect))
        words.sort(key=lambda t: t[0])
        self.words = words
        self.word_starts = [w[0] for w in words]

    def boxes(self, content: str, spans: Sequence[Any]) -> list[TextBox]:
        """Word boxes of an element, anchored to its ``content``: each span of the element is
        found in order in the content (a paragraph split over two pages has two spans)."""
        out: list[TextBox] = []
        cursor = 0
        content = _flat(content)
        full = self.r.content or ""
        for span in spans or []:
            piece = _flat(full[span.offset : span.offset + span.length])
            at = content.find(piece, cursor) if piece else -1
            if at < 0:
                continue
            cursor = at + len(piece)
            i = bisect.bisect_left(self.word_starts, span.offset)
            end = span.offset + span.length
            while i < len(self.words) and self.words[i][0] < end:
                s, e, page, (x0, top, x1, bottom) = self.words[i]
                out.append(TextBox(at + s - span.offset, at + min(e, end) - span.offset, page, x0, top, x1, bottom))
                i += 1
        return out

    def region_rects(self, regions: Sequence[Any] | None) -> list[tuple[int, tuple[float, float, float, float]]]:
        out = []
        for reg in regions or []:
            rect = _rect(reg.polygon, self.scale.get(reg.page_number, POINTS_PER_INCH))
            if rect is not None:
                out.append((reg.page_number, rect))
        return out


def _section_depths(result: Any) -> dict[int, int]:
    """Paragraph index -> depth of the section that holds it (the root section is depth 0)."""
    sections = result.sections or []
    depths: dict[int, int] = {}
    seen: set[int] = set()
    stack = [(0, 0)] if sections else []
    while stack:
        si, depth = stack.pop()
        if si in seen or si >= len(sections):
            continue
        seen.add(si)
        for el in sections[si].elements or []:
            m = _ELEMENT.match(el)
            if m and m.group(1) == "paragraphs":
                depths.setdefault(int(m.group(2)), depth)
            elif m and m.group(1) == "sections":
                stack.append((int(m.group(2)), depth + 1))
    return depths


def _owned_paragraphs(result: Any) -> set[int]:
    """Paragraphs that belong to a table cell, a table or figure caption, or a figure: they
    are read through their table or figure, not as paragraphs of their own."""
    owned: set[int] = set()

    def take(elements: Sequence[str] | None) -> None:
        for el in elements or []:
            m = _ELEMENT.match(el)
            if m and m.group(1) == "paragraphs":
                owned.add(int(m.group(2)))

    for t in result.tables or []:
        for c in t.cells or []:
            take(c.elements)
        if t.caption is not None:
            take(t.caption.elements)
        for f in t.footnotes or []:
            take(f.elements)
    for fig in result.figures or []:
        take(fig.elements)
        if fig.caption is not None:
            take(fig.caption.elements)
    return owned


def _table_rows(table: Any) -> list[list[str]]:
    """The table as a grid of cell texts; a cell spanning rows is repeated in each of them so
    every row reads on its own."""
    grid = [["" for _ in range(table.column_count)] for _ in range(table.row_count)]
    for c in table.cells or []:
        text = normalize_ws(c.content or "")
        for r in range(c.row_index, min(c.row_index + (c.row_span or 1), table.row_count)):
            if c.column_index < table.column_count:
                grid[r][c.column_index] = text
    return grid


def blocks_from_result(result: Any) -> tuple[str, list[Block]]:
    """(title, blocks) of an ``AnalyzeResult``, in reading order (by content offset)."""
    ix = _Result(result)
    depths = _section_depths(result)
    owned = _owned_paragraphs(result)
    items: list[tuple[int, int, list[Block]]] = []  # (offset, tie-break, blocks)
    title = ""

    def first_offset(spans: Sequence[Any] | None) -> int:
        return min((s.offset for s in spans or []), default=0)

    def first_page(regions: Sequence[Any] | None) -> int | None:
        return min((r.page_number for r in regions or []), default=None)

    for i, p in enumerate(result.paragraphs or []):
        if i in owned:
            continue
        text = _flat(p.content)
        if not text.strip():
            continue
        role = p.role or ""
        page = first_page(p.bounding_regions)
        if role == "title" and not title:
            title = normalize_ws(text)
            block = Block(kind="title", text=title, page=page)
        elif role in _HEADER_ROLES:
            block = Block(kind="page_header", text=normalize_ws(text), page=page)
        elif role in ("title", "sectionHeading"):
            block = Block(kind="heading", text=normalize_ws(text), level=max(1, depths.get(i, 1)), page=page)
        else:
            block = Block(kind="paragraph", text=text, page=page, boxes=ix.boxes(text, p.spans))
        items.append((first_offset(p.spans), 0, [block]))

    for t in result.tables or []:
        rows = _table_rows(t)
        boxes: list[TextBox] = []
        for c in t.cells or []:
            for page, (x0, top, x1, bottom) in ix.region_rects(c.bounding_regions):
                for r in range(c.row_index, min(c.row_index + (c.row_span or 1), t.row_count)):
                    boxes.append(TextBox(r, r + 1, page, x0, top, x1, bottom))
        row_boxes = _union_by_row(boxes)
        blocks: list[Block] = []
        if t.caption is not None and (t.caption.content or "").strip():
            cap = t.caption
            blocks.append(Block(kind="paragraph", text=_flat(cap.content), page=first_page(cap.bounding_regions), boxes=ix.boxes(cap.content, cap.spans)))
        if any(any(r) for r in rows):
            blocks.append(Block(
                kind="table", rows=rows, page=first_page(t.bounding_regions), boxes=row_boxes,
                text="\n".join(" | ".join(r) for r in rows),
            ))
        items.append((first_offset(t.spans), 1, blocks))

    for fig in result.figures or []:
        cap = fig.caption
        if cap is None or not (cap.content or "").strip():
            continue
        block = Block(kind="figure_caption", text=_flat(cap.content), page=first_page(cap.bounding_regions), boxes=ix.boxes(cap.content, cap.spans))
        items.append((first_offset(cap.spans or fig.spans), 2, [block]))

    for kv in result.key_value_pairs or []:
        key = normalize_ws(kv.key.content or "") if kv.key is not None else ""
        value = normalize_ws(kv.value.content or "") if kv.value is not None else ""
        if key and value:
            items.append((-1, 0, [Block(kind="kvp", text=f"{key.rstrip(':')}: {value}")]))

    items.sort(key=lambda it: (it[0], it[1]))
    return title, [b for _, _, bs in items for b in bs]


def _union_by_row(boxes: list[TextBox]) -> list[TextBox]:
    """One rectangle per (row, page): the union of the row's cells there."""
    merged: dict[tuple[int, int], TextBox] = {}
    for b in boxes:
        key = (b.start, b.page)
        m = merged.get(key)
        merged[key] = b if m is None else TextBox(
            b.start, b.end, b.page, min(m.x0, b.x0), min(m.top, b.top), max(m.x1, b.x1), max(m.bottom, b.bottom)
        )
    return [merged[k] for k in sorted(merged)]


class AzureDocumentIntelligenceLoader(Loader):
    """Azure AI Document Intelligence (official SDK): paragraphs with polygons, roles, tables, key-value pairs, figure captions."""

    name = "azure_document_intelligence"
    extensions = ()  # set by the profile (``extensions``): see ``accepts``
    by_default: ClassVar[bool] = False
    Params = AzureDIParams
    params: AzureDIParams

    def accepts(self, path: Path) -> bool:
        return path.suffix.lower() in {e.lower() for e in self.params.extensions}

    def _client(self, path: Path) -> Any:
        di = require(path, "azure.ai.documentintelligence", "azure-ai-documentintelligence", "azure-di")
        if not self.params.endpoint:
            raise LoaderError(f"{path}: the azure_document_intelligence loader needs `endpoint` in the index profile")
        key = os.environ.get(self.params.api_key_env, "")
        if key:
            from azure.core.credentials import AzureKeyCredential

            credential: Any = AzureKeyCredential(key)
        else:
            try:
                from azure.identity import DefaultAzureCredential  # type: ignore[import-not-found]
            except ImportError:
                raise LoaderError(
                    f"{path}: no Document Intelligence key in ${self.params.api_key_env}, and azure-identity "
                    "is not installed for a token; set the variable or pip install azure-identity"
                ) from None
            credential = DefaultAzureCredential()
        return di.DocumentIntelligenceClient(
            self.params.endpoint.rstrip("/"), credential, polling_interval=self.params.polling_interval,
        )

    def load(self, path: Path) -> Iterator[SourceDocument]:
        check_size(path, self.params.max_file_mb)
        client = self._client(path)
        from azure.core.exceptions import AzureError, HttpResponseError

        try:
            with client, path.open("rb") as fh:
                poller = client.begin_analyze_document(
                    self.params.model_id, fh, content_type="application/octet-stream",
                    features=self.params.features or None, locale=self.params.locale,
                )
                result = poller.result(timeout=self.params.timeout_s)
        except HttpResponseError as exc:
            detail = exc.error.message if exc.error is not None and exc.error.message else exc.message
            raise LoaderError(f"{path}: Document Intelligence refused it (HTTP {exc.status_code}: {detail})") from None
        except AzureError as exc:
            raise LoaderError(f"{path}: Document Intelligence call failed ({type(exc).__name__}: {exc.message})") from None
        if poller.status().lower() != "succeeded" or result is None:
            raise LoaderError(f"{path}: Document Intelligence did not finish within {self.params.timeout_s:g} s")
        title, blocks = blocks_from_result(result)
        ensure_content(path, blocks)
        yield make_doc(
            title or humanize_stem(path), str(path), blocks, digest=file_md5(path),
            pages=len(result.pages or []), parser=f"azure-document-intelligence:{result.model_id}",
        )


@hookimpl
def register_loaders() -> list[type[Loader]]:
    return [AzureDocumentIntelligenceLoader]
