"""Tiny hand-written PDFs for loader tests (no PDF library needed to *write* them)."""

from __future__ import annotations

from pathlib import Path


def _esc(text: str) -> str:
    return text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")


def text_ops(lines: list[tuple[float, float, float, str]], font: str = "F1") -> str:
    """(x, y, font size, text) -> content-stream operators; font F1 is Helvetica, F2 Helvetica-Bold."""
    return "\n".join(f"BT /{font} {size:g} Tf {x:g} {y:g} Td ({_esc(t)}) Tj ET" for x, y, size, t in lines)


def grid_ops(x0: float, y_top: float, col_w: list[float], rows: list[list[str]], row_h: float = 20) -> str:
    """A ruled table (pdfplumber finds tables by their lines) with cell text."""
    ops = []
    width = sum(col_w)
    for r in range(len(rows) + 1):
        y = y_top - r * row_h
        ops.append(f"{x0:g} {y:g} m {x0 + width:g} {y:g} l S")
    x = x0
    for c in range(len(col_w) + 1):
        ops.append(f"{x:g} {y_top:g} m {x:g} {y_top - len(rows) * row_h:g} l S")
        if c < len(col_w):
            x += col_w[c]
    for r, row in enumerate(rows):
        x = x0
        for c, cell in enumerate(row):
            ops.append(f"BT /F1 10 Tf {x + 4:g} {y_top - (r + 1) * row_h + 6:g} Td ({_esc(cell)}) Tj ET")
            x += col_w[c]
    return "\n".join(ops)


def write_pdf(path: Path, pages: list[str]) -> Path:
    """Write a PDF whose pages have the given content streams (Helvetica as /F1, Helvetica-Bold as /F2)."""
    objs: list[bytes] = []
    n_pages = len(pages)
    kids = " ".join(f"{4 + 2 * i} 0 R" for i in range(n_pages))
    objs.append(b"<< /Type /Catalog /Pages 2 0 R >>")
    objs.append(f"<< /Type /Pages /Kids [{kids}] /Count {n_pages} >>".encode())
    objs.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>")
    for i, content in enumerate(pages):
        data = content.encode("latin-1")
        objs.append(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R /F2 {4 + 2 * n_pages} 0 R >> >> "
            f"/Contents {5 + 2 * i} 0 R >>".encode()
        )
        objs.append(b"<< /Length %d >>\nstream\n" % len(data) + data + b"\nendstream")
    objs.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica-Bold /Encoding /WinAnsiEncoding >>")
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for i, body in enumerate(objs, start=1):
        offsets.append(len(out))
        out += f"{i} 0 obj\n".encode() + body + b"\nendobj\n"
    xref = len(out)
    out += f"xref\n0 {len(objs) + 1}\n0000000000 65535 f \n".encode()
    for off in offsets:
        out += f"{off:010d} 00000 n \n".encode()
    out += f"trailer\n<< /Size {len(objs) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    path.write_bytes(bytes(out))
    return path
