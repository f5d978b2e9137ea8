"""Built-in file loaders: plain text, Markdown, HTML and JSON corpora, and the helpers every
loader module shares (PDF, Word, spreadsheets and Azure Document Intelligence have their own
modules beside this one).

Every loader turns a file into :class:`SourceDocument` s made of :class:`Block` s in reading
order (headings with levels, paragraphs, tables); the skeleton builder
(:mod:`graphroute.core.index.skeleton`) does the rest. Loaders only *read*: they never guess
sentences. Bad input raises :class:`LoaderError` with a reason a user can act on, so the
indexer can report the file and carry on with the others.

Content taxonomy (skeleton reference): titles, key-value pairs and repeated page headers are
emitted as ``title`` / ``kvp`` / ``page_header`` blocks, which the skeleton keeps as metadata
only; paragraphs and table rows become sentences.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from graphroute.core.api.components import Block, ComponentParams, Loader, SourceDocument
from graphroute.core.api.models import content_hash
from graphroute.core.errors import LoaderError
from graphroute.core.hookspecs import hookimpl
from graphroute.core.lib.textcodec import UTF8, NotText, decode_text
from pydantic import Field

# --------------------------------------------------------------------------- shared checks


class FileLoaderParams(ComponentParams):
    max_file_mb: float = Field(50.0, gt=0, description="larger files are refused (the indexer passes parse.max_file_mb)")


def check_size(path: Path, max_file_mb: float) -> int:
    """Refuse missing, empty and oversized files before reading them."""
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise LoaderError(f"{path}: cannot read file ({exc.strerror or exc})") from None
    if size == 0:
        raise LoaderError(f"{path}: empty file")
    if size > max_file_mb * 1024 * 1024:
        raise LoaderError(
            f"{path}: file is {size / 1024 / 1024:.1f} MB, over the limit of {max_file_mb:g} MB "
            "(raise parse.max_file_mb in the index profile to accept it)"
        )
    return size


def read_text(path: Path, max_file_mb: float) -> str:
    """Read a text file (see :func:`read_text_and_encoding`)."""
    return read_text_and_encoding(path, max_file_mb)[0]


def read_text_and_encoding(path: Path, max_file_mb: float) -> tuple[str, str]:
    """Read a text file: UTF-8 (BOM allowed), else the encoding the detector finds
    (:func:`graphroute.core.lib.textcodec.decode_text`); binary content is refused. Returns
    the text with newlines normalised, and the encoding."""
    check_size(path, max_file_mb)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise LoaderError(f"{path}: cannot read file ({exc.strerror or exc})") from None
    # UTF-16/32 text is full of NUL bytes: with a byte-order mark it goes to the detector
    if b"\x00" in raw[:8192] and not raw.startswith((b"\xff\xfe", b"\xfe\xff", b"\x00\x00\xfe\xff")):
        raise LoaderError(f"{path}: binary file (contains NUL bytes), not text")
    try:
        text, encoding = decode_text(raw)
    except NotText as exc:
        raise LoaderError(f"{path}: {exc}") from None
    if not text.strip():
        raise LoaderError(f"{path}: empty file (only whitespace)")
    return text.replace("\r\n", "\n").replace("\r", "\n"), encoding


def encoding_metadata(encoding: str) -> dict[str, str]:
    """Document metadata recording a file's encoding when it is not UTF-8 (the index
    report lists those files)."""
    return {} if encoding == UTF8 else {"encoding": encoding}


def humanize_stem(path: Path) -> str:
    """``property_management-agreement.md`` -> ``property management agreement``."""
    return re.sub(r"[_\-]+", " ", path.stem).strip() or path.name


def normalize_ws(text: str) -> str:
    """Collapse hard line wraps and runs of spaces inside one paragraph."""
    return re.sub(r"\s+", " ", text).strip()


def make_doc(
    title: str, source: str, blocks: list[Block], hash_basis: str = "", *, digest: str | None = None, **metadata: Any
) -> SourceDocument:
    """A document whose content hash is ``digest`` (a binary file's :func:`file_md5`), or the
    hash of ``hash_basis`` (the text a text file was read as)."""
    return SourceDocument(
        title=title.strip() or source, source=source, blocks=blocks,
        content_hash=digest or content_hash(hash_basis), metadata=dict(metadata),
    )


def file_md5(path: Path) -> str:
    """The MD5 of a file's bytes, read in 1 MB pieces (change detection of binary formats)."""
    digest = hashlib.md5(usedforsecurity=False)
    with path.open("rb") as fh:
        for piece in iter(lambda: fh.read(1 << 20), b""):
            digest.update(piece)
    return digest.hexdigest()


def require(path: Path, module: str, package: str, extra: str) -> Any:
    """Import a loader's optional dependency, or refuse the file naming the extra that
    installs it (the indexer reports it for this file and carries on with the others)."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        raise LoaderError(
            f"{path}: reading {path.suffix or 'this file'} needs {package}, which is not installed; "
            f'install it with: pip install "graphroute[{extra}]"'
        ) from None


def check_zip_package(path: Path, what: str, old: str) -> None:
    """Refuse a file that is not a zip package (Office Open XML) before its reader tries, with
    the usual cause: an old binary format under the new extension."""
    try:
        with path.open("rb") as fh:
            magic = fh.read(2)
    except OSError as exc:
        raise LoaderError(f"{path}: cannot read file ({exc.strerror or exc})") from None
    if magic != b"PK":
        raise LoaderError(f"{path}: not {what} (not a zip package); an old binary {old} must be saved as {path.suffix.lower()} first")


def ensure_content(path: Path, blocks: list[Block]) -> None:
    if not any(b.kind in ("paragraph", "table", "figure_caption") for b in blocks):
        raise LoaderError(f"{path}: no text content (only headings or markup)")


# --------------------------------------------------------------------------- plain text and Markdown

_MD_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_MD_SETEXT = re.compile(r"^(=+|-+)\s*$")
_MD_LIST_ITEM = re.compile(r"^\s*(?:[-*+]|\d{1,3}[.)])\s+")
_MD_TABLE_SEP = re.compile(r"^\s*\|?\s*:?-{2,}:?\s*(\|\s*:?-{2,}:?\s*)*\|?\s*$")
_MD_FENCE = re.compile(r"^\s*(```|~~~)")
_MD_INLINE = [
    (re.compile(r"!\[([^\]]*)\]\([^)]*\)"), r"\1"),  # images -> alt text
    (re.compile(r"\[([^\]]+)\]\([^)]*\)"), r"\1"),  # links -> link text
    (re.compile(r"(\*\*|__)(.+?)\1"), r"\2"),  # bold
    (re.compile(r"(?<![\w*])\*(?!\s)(.+?)(?<!\s)\*(?![\w*])"), r"\1"),  # italics
    (re.compile(r"`([^`]+)`"), r"\1"),  # inline code
]


def strip_inline_md(text: str) -> str:
    for pattern, repl in _MD_INLINE:
        text = pattern.sub(repl, text)
    return text


def _split_row(line: str) -> list[str]:
    line = line.strip()
    if line.startswith("|"):
        line = line[1:]
    if line.endswith("|"):
        line = line[:-1]
    return [strip_inline_md(c.strip()) for c in line.split("|")]


def parse_markdown(text: str) -> tuple[list[Block], dict[str, str]]:
    """Blocks of a Markdown text, plus YAML-ish front-matter key/values (metadata only).

    Fenced code is skipped: code is not prose and spaCy sentences of it are noise.
    """
    lines = text.split("\n")
    blocks: list[Block] = []
    kvps: dict[str, str] = {}
    i = 0
    if lines and lines[0].strip() == "---":  # front matter
        for j in range(1, min(len(lines), 200)):
            if lines[j].strip() == "---":
                for fm in lines[1:j]:
                    if ":" in fm:
                        k, v = fm.split(":", 1)
                        if k.strip() and v.strip():
                            kvps[k.strip()] = _unquote(v.strip())
                i = j + 1
                break
    para: list[str] = []

    def flush() -> None:
        if para:
            t = normalize_ws(strip_inline_md(" ".join(para)))
            if t:
                blocks.append(Block(kind="paragraph", text=t))
            para.clear()

    in_fence = False
    while i < len(lines):
        line = lines[i]
        if _MD_FENCE.match(line):
            flush()
            in_fence = not in_fence
            i += 1
            continue
        if in_fence:
            i += 1
            continue
        m = _MD_HEADING.match(line)
        if m:
            flush()
            blocks.append(Block(kind="heading", text=strip_inline_md(m.group(2)).strip(), level=len(m.group(1))))
            i += 1
            continue
        nxt = lines[i + 1] if i + 1 < len(lines) else ""
        if line.strip() and not para and _MD_SETEXT.match(nxt) and not _MD_LIST_ITEM.match(line):
            blocks.append(Block(kind="heading", text=strip_inline_md(line).strip(), level=1 if nxt.strip()[0] == "=" else 2))
            i += 2
            continue
        if "|" in line and _MD_TABLE_SEP.match(nxt):
            flush()
            rows = [_split_row(line)]
            i += 2
            while i < len(lines) and "|" in lines[i] and lines[i].strip():
                rows.append(_split_row(lines[i]))
                i += 1
            blocks.append(Block(kind="table", rows=rows, text="\n".join(" | ".join(r) for r in rows)))
            continue
        if not line.strip():
            flush()
        elif _MD_LIST_ITEM.match(line):
            flush()
            para.append(_MD_LIST_ITEM.sub("", line, count=1))
        elif line.lstrip().startswith(">"):
            para.append(line.lstrip().lstrip(">"))
        else:
            para.append(line)
        i += 1
    flush()
    return blocks, kvps


def _unquote(value: str) -> str:
    """A front-matter value without its YAML quotes: ``"a \\"b\\""`` -> ``a "b"``, ``'it''s'`` ->
    ``it's``. Only a value wrapped in matching quotes is unquoted, so a title that merely
    starts or ends with a quote character keeps it."""
    if len(value) >= 2 and value[0] == value[-1] == '"':
        try:
            decoded = json.loads(value)
        except ValueError:
            return value[1:-1]
        return decoded if isinstance(decoded, str) else value[1:-1]
    if len(value) >= 2 and value[0] == value[-1] == "'":
        return value[1:-1].replace("''", "'")
    return value


def promote_title(blocks: list[Block], fallback: str) -> tuple[str, list[Block]]:
    """A single leading H1 is the document title (metadata), not a section."""
    h1 = [b for b in blocks if b.kind == "heading" and b.level == 1]
    first = next((b for b in blocks if b.kind != "kvp"), None)
    if first is not None and first.kind == "heading" and first.level == 1 and len(h1) == 1:
        idx = blocks.index(first)
        return first.text, [*blocks[:idx], Block(kind="title", text=first.text), *blocks[idx + 1 :]]
    return fallback, blocks


# a plain-text heading: one short line, starting with a capital or a number, with no
# sentence or clause punctuation at its end (a line ending in ":" introduces what follows)
# and no comma (a byline "By A. Writer, Reporter", an address, a list) or "label: value"
_PLAIN_HEADING = re.compile(r"^[A-Z0-9](?:[^\n,:]|:(?!\s)){0,78}[^\s.!?:;,]$")
_PLAIN_HEADING_WORDS = 12
# a paragraph's first line is its heading only when it is this much shorter than the next
# line: the first line of a hard-wrapped paragraph runs to the wrap width
_HEADING_LINE_SHARE = 0.6


def _plain_heading(line: str) -> bool:
    line = line.strip()
    return (
        bool(_PLAIN_HEADING.match(line))
        and len(line.split()) <= _PLAIN_HEADING_WORDS
        and not _MD_LIST_ITEM.match(line)
    )


def text_blocks(text: str) -> list[Block]:
    """Paragraphs of a plain text (blank lines separate them; a paragraph's lines are joined)
    with its headings: Markdown-style ``#`` lines, a short line standing alone before more
    text, and a short first line above longer ones ("Sick leave" over its paragraph).
    Nothing else is read as Markdown: list markers, backquotes and asterisks in prose stay
    as they are."""
    parts = [p.strip("\n") for p in re.split(r"\n\s*\n", text) if p.strip()]
    blocks: list[Block] = []
    for i, part in enumerate(parts):
        lines = [ln for ln in part.split("\n") if ln.strip()]
        para: list[str] = []
        for j, line in enumerate(lines):
            m = _MD_HEADING.match(line.strip())
            heading = None
            if m and m.group(2):
                heading = (m.group(2).strip(), len(m.group(1)))
            elif j == 0 and _plain_heading(line):
                alone = len(lines) == 1 and i + 1 < len(parts)
                above = len(lines) > 1 and len(line.strip()) <= _HEADING_LINE_SHARE * len(lines[1].strip())
                if alone or above:
                    heading = (line.strip(), 2)
            if heading is None:
                para.append(line)
                continue
            if para:
                blocks.append(Block(kind="paragraph", text=normalize_ws(" ".join(para))))
                para = []
            blocks.append(Block(kind="heading", text=heading[0], level=heading[1]))
        if para:
            blocks.append(Block(kind="paragraph", text=normalize_ws(" ".join(para))))
    return blocks


class TextLoader(Loader):
    """Plain text (.txt): blank lines separate paragraphs; short lines standing alone are
    headings (a lone first one is the title, else the file name is)."""

    name = "text"
    extensions = (".txt", ".text")
    version = 2  # 2: headings are sections
    Params = FileLoaderParams
    params: FileLoaderParams

    def load(self, path: Path) -> Iterator[SourceDocument]:
        text, encoding = read_text_and_encoding(path, self.params.max_file_mb)
        title = humanize_stem(path)
        first, rest = [*re.split(r"\n\s*\n", text.strip(), maxsplit=1), ""][:2]
        first = first.strip()
        # plain-text convention: a short first line standing alone, without final
        # punctuation, is the title (metadata), not a sentence
        if rest.strip() and "\n" not in first and len(first) <= 100 and first[-1] not in ".!?:;,":
            m = _MD_HEADING.match(first)
            title = m.group(2) if m and m.group(2) else first
            blocks = [Block(kind="title", text=title), *text_blocks(rest)]
        else:
            blocks = text_blocks(text)
        ensure_content(path, blocks)
        yield make_doc(title, str(path), blocks, text, **encoding_metadata(encoding))


class MarkdownLoader(Loader):
    """Markdown (.md): headings become sections with levels, pipe tables become tables."""

    name = "markdown"
    extensions = (".md", ".markdown")
    Params = FileLoaderParams
    params: FileLoaderParams

    def load(self, path: Path) -> Iterator[SourceDocument]:
        text, encoding = read_text_and_encoding(path, self.params.max_file_mb)
        blocks, kvps = parse_markdown(text)
        # a front-matter title is the document's (an HTTP upload's title is written there);
        # a leading H1 is then the first section, unless it repeats that title
        given = kvps.get("title")
        title, promoted = promote_title(blocks, given or humanize_stem(path))
        if given and title != given:  # the H1 names a section under the given title
            title = given
        else:
            blocks = promoted
        blocks = [Block(kind="kvp", text=f"{k}: {v}") for k, v in kvps.items()] + blocks
        ensure_content(path, blocks)
        yield make_doc(title, str(path), blocks, text, **encoding_metadata(encoding))


# --------------------------------------------------------------------------- HTML

_HTML_SKIP = {"script", "style", "noscript", "template", "head", "svg", "math", "iframe", "object", "canvas"}
# Page furniture rather than content: navigation, footers, the site banner, search forms.
# A <header> is furniture only on a page that marks its content (<main>, <article>) and only
# outside it, where it holds the site's name and menu; inside an article, or on a page with
# no such mark, it holds the page's own heading.
_HTML_FURNITURE = {"nav", "footer"}
_HTML_FURNITURE_ROLES = {"navigation", "banner", "contentinfo", "search"}
_HTML_CONTENT = {"main", "article"}


def _is_furniture(tag: Any, open_tags: list[Any], marked_content: bool) -> bool:
    if tag.name in _HTML_FURNITURE or str(tag.get("role") or "").lower() in _HTML_FURNITURE_ROLES:
        return True
    return (tag.name == "header" and marked_content
            and not any(getattr(t, "name", None) in _HTML_CONTENT for t in open_tags))
_HTML_HEADINGS = {"h1": 1, "h2": 2, "h3": 3, "h4": 4, "h5": 5, "h6": 6}
_HTML_BLOCKS = {
    "p", "div", "li", "blockquote", "pre", "section", "article", "main", "aside", "header",
    "footer", "nav", "figure", "figcaption", "address", "body", "ul", "ol", "form", "fieldset",
    "details", "summary", "caption", "hr", "br",
}


class _HtmlWalker:
    """Iterative (explicit-stack) walk over a BeautifulSoup tree.

    Recursion would hit Python's limit on deeply nested markup; an explicit stack of
    (tag, child-iterator) pairs handles any depth in constant Python stack.
    """

    def __init__(self, marked_content: bool = False) -> None:
        self.marked_content = marked_content  # the page has a <main> or an <article>
        self.blocks: list[Block] = []
        self.kvps: list[str] = []
        self.buf: list[str] = []
        self.heading: int = 0  # level of the heading being read, 0 = none
        self.table_depth = 0
        self.rows: list[list[str]] = []
        self.cell: list[str] | None = None
        self.dl_term: str | None = None

    def flush(self) -> None:
        text = normalize_ws("".join(self.buf))
        self.buf.clear()
        if not text:
            return
        if self.heading:
            self.blocks.append(Block(kind="heading", text=text, level=self.heading))
        else:
            self.blocks.append(Block(kind="paragraph", text=text))

    def enter(self, name: str) -> None:
        if self.table_depth:
            if name == "table":
                self.table_depth += 1
            elif self.table_depth == 1 and name == "tr":
                self.rows.append([])
            elif self.table_depth == 1 and name in ("td", "th"):
                self.cell = []
            elif name == "br" and self.cell is not None:
                self.cell.append(" ")
            return
        if name == "table":
            self.flush()
            self.table_depth = 1
            self.rows = []
        elif name in _HTML_HEADINGS:
            self.flush()
            self.heading = _HTML_HEADINGS[name]
        elif name in ("dt", "dd") or name in _HTML_BLOCKS:
            self.flush()

    def exit(self, name: str) -> None:
        if self.table_depth:
            if name == "table":
                self.table_depth -= 1
                if self.table_depth == 0:
                    rows = [r for r in self.rows if any(c for c in r)]
                    if rows:
                        self.blocks.append(Block(kind="table", rows=rows, text="\n".join(" | ".join(r) for r in rows)))
                    self.rows = []
            elif self.table_depth == 1 and name in ("td", "th") and self.cell is not None:
                if not self.rows:
                    self.rows.append([])
                self.rows[-1].append(normalize_ws("".join(self.cell)))
                self.cell = None
            return
        if name in _HTML_HEADINGS:
            self.flush()
            self.heading = 0
        elif name == "dt":
            self.dl_term = normalize_ws("".join(self.buf))
            self.buf.clear()
        elif name == "dd":
            value = normalize_ws("".join(self.buf))
            self.buf.clear()
            if self.dl_term and value:
                self.kvps.append(f"{self.dl_term}: {value}")
            self.dl_term = None
        elif name in _HTML_BLOCKS:
            self.flush()

    def text(self, s: str) -> None:
        if self.table_depth:
            if self.cell is not None:
                self.cell.append(s)
            return
        self.buf.append(s)

    def walk(self, root: Any) -> None:
        from bs4 import NavigableString, Tag
        from bs4.element import CData

        stack: list[tuple[Any, Iterator[Any]]] = [(root, iter(root.contents))]
        while stack:
            node, children = stack[-1]
            child = next(children, None)
            if child is None:
                stack.pop()
                if isinstance(node, Tag) and node is not root:
                    self.exit(node.name)
                continue
            if isinstance(child, Tag):
                if child.name in _HTML_SKIP or _is_furniture(child, [t for t, _ in stack], self.marked_content):
                    continue
                self.enter(child.name)
                stack.append((child, iter(child.contents)))
            elif isinstance(child, NavigableString) and (type(child) is NavigableString or isinstance(child, CData)):
                self.text(str(child))
        self.flush()


class HtmlLoader(Loader):
    """HTML (.html/.htm): headings, paragraphs and tables, any nesting depth; navigation, footers and the site banner are left out."""

    name = "html"
    extensions = (".html", ".htm", ".xhtml")
    Params = FileLoaderParams
    params: FileLoaderParams

    def load(self, path: Path) -> Iterator[SourceDocument]:
        BeautifulSoup = require(path, "bs4", "beautifulsoup4", "html").BeautifulSoup

        text = read_text(path, self.params.max_file_mb)
        soup = BeautifulSoup(text, "html.parser")
        title_tag = soup.find("title")
        html_title = normalize_ws(title_tag.get_text()) if title_tag is not None else ""
        walker = _HtmlWalker(marked_content=soup.find(_HTML_CONTENT) is not None)
        walker.walk(soup)
        blocks = walker.blocks
        if html_title:
            title = html_title
            # an <h1> repeating the <title> is the title, not a section
            first = next((b for b in blocks if b.kind == "heading"), None)
            if first is not None and first.level == 1 and first.text == html_title:
                first.kind = "title"
        else:
            title, blocks = promote_title(blocks, humanize_stem(path))
        blocks = [Block(kind="kvp", text=k) for k in walker.kvps] + blocks
        ensure_content(path, blocks)
        yield make_doc(title, str(path), blocks, text)


# --------------------------------------------------------------------------- JSON corpus


class JsonCorpusParams(FileLoaderParams):
    markdown: bool = Field(
        False,
        description="read each entry's text as Markdown, as the .md loader reads a file: `#` headings "
        "start sections, list items and table rows are their own blocks; off: blank-line paragraphs only",
    )


class JsonCorpusLoader(Loader):
    """JSON corpus (.json, .jsonl): {title, text} entries; each is one document (``path#i``).

    A .json file is one JSON value, a list of entries (or an object holding it under
    ``documents``, ``docs``, ``corpus`` or ``data``): when it is not valid JSON the file fails.
    A .jsonl file holds one entry a line, each read on its own, so a line that is not valid
    JSON is left out as an entry without text is, with a warning naming it (``line 3``); the
    file fails only when no entry has text."""

    name = "json_corpus"
    extensions = (".json", ".jsonl")
    Params = JsonCorpusParams
    params: JsonCorpusParams

    def load(self, path: Path) -> Iterator[SourceDocument]:
        raw = read_text(path, self.params.max_file_mb)
        entries: list[tuple[str, Any]] = []  # where a warning says the entry is, and the entry
        invalid: list[str] = []  # the .jsonl lines that are not valid JSON, as they are reported
        if path.suffix.lower() == ".jsonl":
            for lineno, line in enumerate(raw.splitlines(), 1):
                if not line.strip():
                    continue
                try:
                    entries.append((f"line {lineno}", json.loads(line)))
                except json.JSONDecodeError as exc:  # exc.lineno counts within the line: always 1
                    invalid.append(f"invalid JSON (line {lineno}, column {exc.colno}: {exc.msg})")
                    entries.append((invalid[-1], _INVALID))
        else:
            try:
                value = json.loads(raw)
            except json.JSONDecodeError as exc:
                raise LoaderError(f"{path}: invalid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from None
            if isinstance(value, dict):
                value = next((value[k] for k in ("documents", "docs", "corpus", "data") if isinstance(value.get(k), list)), value)
            if not isinstance(value, list) or not value:
                raise LoaderError(f"{path}: expected a non-empty JSON list of {{title, text}} objects")
            entries = [(f"entry {i}", e) for i, e in enumerate(value)]
        docs = []
        for i, (where, entry) in enumerate(entries):  # i: the entry's number in its id, path#i
            if entry is _INVALID:
                self.warn(f"{where}; left out")
            elif (problem := _entry_problem(entry)) is not None:
                self.warn(f"{where}: {problem}; left out")
            else:
                docs.append(self._document(path, i, entry))
        if not docs:
            self.take_warnings()  # the file fails, for the reason below
            if len(invalid) == len(entries):
                raise LoaderError(f"{path}: {invalid[0]}")
            raise LoaderError(f"{path}: no entry has text (expected [{{title, text}}, ...] with a non-empty string 'text')")
        yield from docs

    def _document(self, path: Path, i: int, entry: dict[str, Any]) -> SourceDocument:
        title = str(entry.get("title") or f"{path.stem} #{i}")
        text = entry["text"].replace("\r\n", "\n")
        if self.params.markdown:
            blocks = parse_markdown(text)[0]
        else:
            blocks = [Block(kind="paragraph", text=normalize_ws(p)) for p in re.split(r"\n\s*\n", text) if p.strip()]
        return make_doc(title, f"{path}#{i}", blocks, f"{title}\n{text}")


_INVALID = object()  # a .jsonl line that is not valid JSON


def _entry_problem(entry: Any) -> str | None:
    """Why a JSON value gives no document; None when it does."""
    if not isinstance(entry, dict):
        return f"not a {{title, text}} object but {'null' if entry is None else type(entry).__name__}"
    text = entry.get("text")
    if not isinstance(text, str):
        return "no 'text' field" if "text" not in entry else f"'text' is not a string but {type(text).__name__}"
    return "empty 'text'" if not text.strip() else None


@hookimpl
def register_loaders() -> list[type[Loader]]:
    return [TextLoader, MarkdownLoader, HtmlLoader, JsonCorpusLoader]
