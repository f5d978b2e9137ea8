"""Small office documents for loader tests, written with the libraries the loaders read them
with (python-docx, openpyxl): a few KB each."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path


def write_docx(path: Path) -> Path:
    """A policy with a title, nested headings, a list, a table, a header and a footer."""
    import docx

    d = docx.Document()
    d.core_properties.author = "Facilities Office"
    d.sections[0].header.paragraphs[0].text = "Harborview Internal"
    d.sections[0].footer.paragraphs[0].text = "Page footer text"
    d.add_paragraph("Travel Policy", style="Title")
    d.add_heading("Approvals", level=1)
    d.add_paragraph("Every trip abroad needs written approval from the regional director.")
    d.add_heading("Exceptions", level=2)
    d.add_paragraph("Emergency travel may be approved afterwards.")
    d.add_paragraph("First listed item about booking early.", style="List Bullet")
    d.add_paragraph("Second listed item about receipts.", style="List Bullet")
    d.add_heading("Allowances", level=1)
    table = d.add_table(rows=3, cols=2)
    for r, (city, amount) in enumerate([("City", "Daily allowance"), ("Lisbon", "85 euros"), ("Oslo", "140 euros")]):
        table.cell(r, 0).text = city
        table.cell(r, 1).text = amount
    d.add_paragraph("Allowances are reviewed every January.")
    d.save(str(path))
    return path


def write_xlsx(path: Path, sheets: dict[str, Sequence[Sequence[object]]]) -> Path:
    import openpyxl

    wb = openpyxl.Workbook()
    wb.remove(wb.active)
    for name, rows in sheets.items():
        ws = wb.create_sheet(name)
        for row in rows:
            ws.append(row)
    wb.save(str(path))
    return path
