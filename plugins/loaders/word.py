"""Word loader (.docx) via python-docx: the document's own structure, in reading order.

* Paragraphs styled ``Heading 1`` .. ``Heading 9`` become sections at that level (they nest
  as the levels say); ``Title`` is the document title.
* Every other paragraph, list items included, is a paragraph block in document order.
* Tables become table blocks (first row = header), linearised by the skeleton into
  ``Header: value | Header: value`` sentences; a merged cell counts once per row.
* Page headers and footers are metadata (``page_header`` blocks), never sentences; so are the
  core properties (author, subject, keywords) as key-value pairs.

Dropped: images and their alt text, text boxes and shapes, footnotes and comments, tracked
deletions, nested tables (the outer cell keeps its own paragraphs).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from graphroute.core.api.components import Block, Loader, SourceDocument
from graphroute.core.errors import LoaderError
from graphroute.core.hookspecs import hookimpl

from .files import (
    FileLoaderParams,
    check_size,
    check_zip_package,
    ensure_content,
    file_md5,
    humanize_stem,
    make_doc,
    normalize_ws,
    promote_title,
    require,
)

_HEADING_STYLE = re.compile(r"^heading\s*([1-9])$", re.IGNORECASE)
_CORE_KVPS = ("author", "subject", "keywords", "category")


def _style_name(paragraph: Any) -> str:
    try:
        style = paragraph.style
    except (KeyError, ValueError, AttributeError):  # a style id the document does not define
        return ""
    return str(getattr(style, "name", "") or "")


def _table_rows(table: Any) -> list[list[str]]:
    """Cell texts row by row; a horizontally merged cell (python-docx returns it once per
    grid column it spans) is kept once."""
    rows: list[list[str]] = []
    for row in table.rows:
        cells: list[str] = []
        last = None
        for cell in row.cells:
            if last is not None and cell._tc is last:
                continue
            last = cell._tc
            cells.append(normalize_ws(cell.text))
        if any(cells):
            rows.append(cells)
    return rows


def _headers_footers(document: Any) -> list[str]:
    """The distinct texts of every section's headers and footers, in order. A part "linked to
    previous" has no text of its own (it shows the previous section's, or none)."""
    seen: dict[str, None] = {}
    for section in document.sections:
        parts = [section.header, section.footer, section.first_page_header, section.first_page_footer,
                 section.even_page_header, section.even_page_footer]
        for part in parts:
            if part.is_linked_to_previous:
                continue
            for p in part.paragraphs:
                text = normalize_ws(p.text)
                if text:
                    seen.setdefault(text)
    return list(seen)


class DocxLoader(Loader):
    """Word (.docx) via python-docx: headings as nested sections, paragraphs and list items in order, tables as rows."""

    name = "docx"
    extensions = (".docx",)
    Params = FileLoaderParams
    params: FileLoaderParams

    def load(self, path: Path) -> Iterator[SourceDocument]:
        docx = require(path, "docx", "python-docx", "docx")
        check_size(path, self.params.max_file_mb)
        check_zip_package(path, "a Word .docx file", ".doc")
        try:
            document = docx.Document(str(path))
            blocks, title = self._blocks(document)
            headers = _headers_footers(document)
            kvps: list[str] = []
            if _has_core_properties(document):  # else python-docx makes up a title, "Word Document"
                props = document.core_properties
                kvps = [f"{k}: {v}" for k in _CORE_KVPS if (v := normalize_ws(str(getattr(props, k, "") or "")))]
                title = title or normalize_ws(str(props.title or ""))
        except LoaderError:
            raise
        except Exception as exc:  # python-docx and lxml raise many types on a damaged package
            raise LoaderError(f"{path}: unreadable Word document ({type(exc).__name__}: {exc})") from None
        if title:
            blocks = [Block(kind="title", text=title), *blocks]
        else:
            title, blocks = promote_title(blocks, humanize_stem(path))
        blocks = [Block(kind="kvp", text=k) for k in kvps] + [Block(kind="page_header", text=h) for h in headers] + blocks
        ensure_content(path, blocks)
        yield make_doc(title, str(path), blocks, digest=file_md5(path))

    @staticmethod
    def _blocks(document: Any) -> tuple[list[Block], str]:
        """Body blocks in document order, and the text of a ``Title``-styled paragraph."""
        from docx.table import Table

        blocks: list[Block] = []
        title = ""
        for item in document.iter_inner_content():
            if isinstance(item, Table):
                rows = _table_rows(item)
                if rows:
                    blocks.append(Block(kind="table", rows=rows, text="\n".join(" | ".join(r) for r in rows)))
                continue
            text = normalize_ws(item.text)
            if not text:
                continue
            style = _style_name(item)
            m = _HEADING_STYLE.match(style)
            if m:
                blocks.append(Block(kind="heading", text=text, level=int(m.group(1))))
            elif style.lower() == "title" and not title:
                title = text
            else:
                blocks.append(Block(kind="paragraph", text=text))
        return blocks, title


@hookimpl
def register_loaders() -> list[type[Loader]]:
    return [DocxLoader]


def _has_core_properties(document: Any) -> bool:
    """Whether the package has its own core properties part (docProps/core.xml)."""
    from docx.opc.constants import RELATIONSHIP_TYPE

    return any(rel.reltype == RELATIONSHIP_TYPE.CORE_PROPERTIES for rel in document.part.package.rels.values())
