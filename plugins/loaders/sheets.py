"""Spreadsheet loaders: CSV/TSV (the standard library's csv) and Excel workbooks (openpyxl).

A sheet is a table: its first non-empty row names the columns, every later row becomes one
table-row sentence ``Header: value | Header: value`` (empty cells left out), so a row is
found by what it says and cited on its own. A workbook's sheets are sections named after
them; a CSV file is one table.

Both read row by row: a CSV file through ``csv.reader`` on the open file, a workbook with
openpyxl's read-only mode (cells streamed from the XML, never the whole workbook model in
memory). A sheet longer than ``max_rows`` is refused with a message naming the sheet and the
setting, rather than half indexed.

Dropped: formulas (the value Excel last saved is read), formatting (a number is read as the
number, e.g. ``1200`` for a cell shown as ``$1,200``), comments, charts, images, and empty rows
and columns.
"""

from __future__ import annotations

import csv
import datetime as dt
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from graphroute.core.api.components import Block, Loader, SourceDocument
from graphroute.core.errors import LoaderError
from graphroute.core.hookspecs import hookimpl
from pydantic import Field

from .files import (
    FileLoaderParams,
    check_size,
    check_zip_package,
    ensure_content,
    file_md5,
    humanize_stem,
    make_doc,
    normalize_ws,
    require,
)

DEFAULT_MAX_ROWS = 100_000


class SheetParams(FileLoaderParams):
    max_rows: int = Field(
        DEFAULT_MAX_ROWS, ge=1,
        description="rows per sheet (header included) above which the file is refused; set it in the index profile's `loaders`",
    )


def cell_text(value: Any) -> str:
    """A cell as text: whole floats without ``.0``, dates as ISO dates, times without
    microseconds."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    if isinstance(value, dt.datetime):
        return value.date().isoformat() if value.time() == dt.time(0) else value.isoformat(sep=" ", timespec="seconds")
    if isinstance(value, dt.date | dt.time):
        return value.isoformat()
    return normalize_ws(str(value))


def table_block(path: Path, sheet: str, rows: Iterable[Iterable[Any]], max_rows: int) -> Block | None:
    """The sheet's non-empty rows as one table block (trailing empty cells trimmed), or None
    for an empty sheet; past ``max_rows`` rows the file is refused."""
    out: list[list[str]] = []
    for row in rows:
        cells = [cell_text(v) for v in row]
        while cells and not cells[-1]:
            cells.pop()
        if not cells:
            continue
        if len(out) >= max_rows:
            raise LoaderError(
                f"{path}: sheet {sheet!r} has more than {max_rows:,} rows, the spreadsheet loaders' max_rows; "
                "raise it in the index profile (loaders: [{use: ..., with: {max_rows: N}}]) or split the sheet"
            )
        out.append(cells)
    if not out:
        return None
    return Block(kind="table", rows=out, text="\n".join(" | ".join(r) for r in out))


class CsvLoader(Loader):
    """CSV and TSV (.csv, .tsv): one table, a table-row sentence per row with the header's column names."""

    name = "csv"
    extensions = (".csv", ".tsv", ".tab")
    Params = SheetParams
    params: SheetParams

    def load(self, path: Path) -> Iterator[SourceDocument]:
        check_size(path, self.params.max_file_mb)
        try:
            with path.open("r", encoding="utf-8-sig", newline="") as fh:
                head = fh.read(8192)
                if "\x00" in head:
                    raise LoaderError(f"{path}: binary file (contains NUL bytes), not CSV text")
                fh.seek(0)
                block = table_block(path, path.stem, csv.reader(fh, self._dialect(path, head)), self.params.max_rows)
        except UnicodeDecodeError as exc:
            raise LoaderError(f"{path}: not valid UTF-8 text ({exc.reason}); re-save the file as UTF-8") from None
        except csv.Error as exc:
            raise LoaderError(f"{path}: malformed CSV ({exc})") from None
        except OSError as exc:
            raise LoaderError(f"{path}: cannot read file ({exc.strerror or exc})") from None
        blocks = [block] if block is not None else []
        ensure_content(path, blocks)
        yield make_doc(humanize_stem(path), str(path), blocks, digest=file_md5(path), rows=len(blocks[0].rows or []))

    @staticmethod
    def _dialect(path: Path, head: str) -> type[csv.Dialect] | csv.Dialect:
        """Tab for .tsv/.tab; for .csv the delimiter csv.Sniffer sees in the first 8 KB
        (comma, semicolon, tab or pipe), comma when it cannot tell."""
        if path.suffix.lower() in (".tsv", ".tab"):
            return csv.excel_tab
        try:
            return csv.Sniffer().sniff(head, delimiters=",;\t|")
        except csv.Error:
            return csv.excel


class XlsxLoader(Loader):
    """Excel workbooks (.xlsx, .xlsm) via openpyxl, streamed: each sheet a section, each row a table-row sentence."""

    name = "xlsx"
    extensions = (".xlsx", ".xlsm")
    Params = SheetParams
    params: SheetParams

    def load(self, path: Path) -> Iterator[SourceDocument]:
        openpyxl = require(path, "openpyxl", "openpyxl", "xlsx")
        check_size(path, self.params.max_file_mb)
        check_zip_package(path, "an Excel .xlsx workbook", ".xls")
        blocks: list[Block] = []
        title = ""
        try:
            wb = openpyxl.load_workbook(path, read_only=True, data_only=True)
        except Exception as exc:  # zipfile, lxml and openpyxl raise many types on a damaged file
            raise LoaderError(f"{path}: unreadable workbook ({type(exc).__name__}: {exc})") from None
        try:
            title = normalize_ws(str(wb.properties.title or ""))
            for ws in wb.worksheets:
                block = table_block(path, ws.title, ws.iter_rows(values_only=True), self.params.max_rows)
                if block is not None:
                    blocks += [Block(kind="heading", text=ws.title, level=1), block]
        except LoaderError:
            raise
        except Exception as exc:
            raise LoaderError(f"{path}: unreadable workbook ({type(exc).__name__}: {exc})") from None
        finally:
            wb.close()  # read-only mode keeps the zip file open until closed
        ensure_content(path, blocks)
        sheets = sum(b.kind == "heading" for b in blocks)
        yield make_doc(title or humanize_stem(path), str(path), blocks, digest=file_md5(path), sheets=sheets)


@hookimpl
def register_loaders() -> list[type[Loader]]:
    return [CsvLoader, XlsxLoader]
