"""Build the pydocs corpus: the Python 3.11 documentation cut into one passage per section.

    apt-get download python3.11-doc && dpkg -x python3.11-doc_*_all.deb deb
    python build_corpus.py deb/usr/share/doc/python3.11/html -o corpus.json

Writes a JSON list of ``{"title", "text"}``. A passage is one section of a page, titled
"Page title: Section heading" (a page's top section by the page title alone; a repeated
title gets its parent section's heading, then a counter). Its text is the section's own
paragraphs, list items, table rows (cells joined by " | ") and definition-list entries (API
signatures with their descriptions), blank-line separated: not its subsections, which are
passages of their own, and not code blocks. Navigation, index, "What's New", changelog,
licence and C API pages are left out, and so is a passage of under 25 words. Pages are read
in sorted order, so the output is the same on every run. Needs beautifulsoup4
(``graphroute[html]``).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path
from typing import Any

from bs4 import BeautifulSoup, Comment, NavigableString, Tag

MIN_WORDS = 25
SKIP_DIRS = ("c-api/", "whatsnew/", "_sources/", "_static/", "_images/", "_downloads/")
SKIP_TOP_FILES = {"search.html", "py-modindex.html", "license.html", "copyright.html", "about.html",
                  "bugs.html", "contents.html", "index.html", "download.html"}
BLOCK_TAGS = {
    "p", "div", "ul", "ol", "dl", "dt", "dd", "li", "table", "thead", "tbody", "tfoot", "tr", "td", "th",
    "blockquote", "section", "pre", "h1", "h2", "h3", "h4", "h5", "h6", "figure", "figcaption", "caption",
    "aside", "nav", "form", "hr", "colgroup", "col", "details", "summary", "center", "address", "main",
    "header", "footer", "article",
}
HEADINGS = ("h1", "h2", "h3", "h4", "h5", "h6")
_WS = re.compile(r"\s+")


def norm(text: str) -> str:
    return _WS.sub(" ", text.replace("\u00b6", "")).strip()


def is_section(tag: Any) -> bool:
    return isinstance(tag, Tag) and (tag.name == "section" or (tag.name == "div" and "section" in (tag.get("class") or [])))


def drop_noise(body: Tag) -> None:
    """Remove what never holds prose: scripts, code blocks, images, header links, tables of
    contents, admonition labels."""
    for t in body.find_all(["script", "style", "pre", "img", "svg"]):
        t.decompose()
    for c in body.find_all(string=lambda s: isinstance(s, Comment)):
        c.extract()
    for t in body.find_all("a", class_="headerlink"):
        t.decompose()
    for t in [t for t in body.find_all(True) if _noise(t.get("class") or [])]:
        t.extract()


def _noise(cls: list[str]) -> bool:
    return (any(c.startswith("highlight") for c in cls) or "doctest" in cls or "toctree-wrapper" in cls
            or ("contents" in cls and "local" in cls) or "admonition-title" in cls or "sidebar-title" in cls)


class Blocks:
    """The text blocks of one section, its subsections left out."""

    def __init__(self) -> None:
        self.blocks: list[str] = []
        self._buf: list[str] = []

    def flush(self) -> None:
        text = norm("".join(self._buf))
        self._buf = []
        if text:
            self.blocks.append(text)

    def walk(self, node: Tag) -> None:
        for child in node.children:
            if isinstance(child, NavigableString):
                self._buf.append(str(child))
            elif not isinstance(child, Tag):
                continue
            elif is_section(child) or child.name in HEADINGS:
                self.flush()
            elif child.name == "tr":
                self.flush()
                cells = [c for c in (norm(td.get_text()) for td in child.find_all(["td", "th"], recursive=False)) if c]
                if cells:
                    self.blocks.append(" | ".join(cells))
            elif child.name == "br":
                self._buf.append(" ")
            elif child.name in BLOCK_TAGS or any(isinstance(d, Tag) and d.name in BLOCK_TAGS for d in child.descendants):
                self.flush()
                self.walk(child)
                self.flush()
            else:  # inline
                self._buf.append(child.get_text())


def heading_of(section: Tag) -> str | None:
    for child in section.children:
        if not isinstance(child, Tag):
            continue
        if child.name in HEADINGS:
            return norm(child.get_text())
        if is_section(child):
            return None
        inner = child.find(HEADINGS) if child.name == "span" else None  # a heading behind an anchor
        if inner is not None:
            return norm(inner.get_text())
    return None


def page_files(root: Path) -> list[str]:
    out = []
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            rel = (Path(dirpath) / name).relative_to(root).as_posix()
            if (not name.endswith(".html") or rel.startswith(SKIP_DIRS) or ("/" not in rel and name in SKIP_TOP_FILES)
                    or name.startswith("genindex") or "changelog" in name):
                continue
            out.append(rel)
    return sorted(out)


def page_passages(path: Path) -> list[dict[str, Any]]:
    """Every section of one page: title, text, and its parent section's heading."""
    soup = BeautifulSoup(path.read_text(encoding="utf-8"), "html.parser")
    body = soup.find("div", class_="body") or soup.body
    if not isinstance(body, Tag):
        return []
    drop_noise(body)
    sections = body.find_all(is_section)
    page = next((h for s in sections if (h := heading_of(s))), None)
    if page is None:
        t = soup.find("title")
        page = norm(t.get_text().split("\u2014 Python")[0]) if t else path.stem
    out = []
    for s in sections:
        heading = heading_of(s) or ""
        parent = s.find_parent(is_section)
        blocks = Blocks()
        blocks.walk(s)
        blocks.flush()
        title = page if parent is None and heading == page else (f"{page}: {heading}" if heading else page)
        out.append({"title": title, "text": "\n\n".join(blocks.blocks), "parent": heading_of(parent) if parent else None,
                    "page": page})
    return out


def build(root: Path) -> list[dict[str, str]]:
    """The corpus of the html folder ``root``, titles made unique."""
    seen: set[str] = set()
    corpus = []
    for rel in page_files(root):
        for p in page_passages(root / rel):
            if len(p["text"].split()) < MIN_WORDS:
                continue
            title = p["title"]
            if title in seen and p["parent"] and p["parent"] != p["page"]:
                title = f"{title} ({p['parent']})"
            base, n = title, 2
            while title in seen:
                title, n = f"{base} ({n})", n + 1
            seen.add(title)
            corpus.append({"title": title, "text": p["text"]})
    return corpus


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("html_dir", type=Path)
    ap.add_argument("-o", "--output", type=Path, default=Path("corpus.json"))
    args = ap.parse_args()
    corpus = build(args.html_dir)
    args.output.write_text(json.dumps(corpus, ensure_ascii=False, indent=1), encoding="utf-8")
    words = sum(len(p["text"].split()) for p in corpus)
    print(f"{len(corpus)} passages, {words:,} words -> {args.output}", file=sys.stderr)


if __name__ == "__main__":
    main()
