"""Fuzz every file loader: random bytes, random text, random Markdown and HTML structures.

Whatever the file holds, a loader either yields documents (with a title and at least one
paragraph or table) or raises LoaderError with a message naming the file - never another
exception, which the indexer would have to report as a loader bug.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from graphroute.core.api.components import Loader
from graphroute.core.errors import LoaderError
from graphroute.plugins.loaders.files import (
    HtmlLoader,
    JsonCorpusLoader,
    MarkdownLoader,
    TextLoader,
)
from graphroute.plugins.loaders.pdf import PdfLoader
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

LOADERS: dict[str, Loader] = {
    ".txt": TextLoader(TextLoader.Params()),
    ".md": MarkdownLoader(MarkdownLoader.Params()),
    ".html": HtmlLoader(HtmlLoader.Params()),
    ".json": JsonCorpusLoader(JsonCorpusLoader.Params()),
    ".jsonl": JsonCorpusLoader(JsonCorpusLoader.Params()),
    ".pdf": PdfLoader(PdfLoader.Params()),
}
FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def load_or_explain(suffix: str, data: bytes) -> int:
    """Documents loaded (0 when refused with a LoaderError that names the file)."""
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / f"fuzz{suffix}"
        path.write_bytes(data)
        try:
            docs = list(LOADERS[suffix].load(path))
        except LoaderError as exc:
            assert str(path) in str(exc) and str(exc).strip() != str(path)
            return 0
        for doc in docs:
            assert doc.title.strip()
            assert doc.content_hash
            assert any(b.kind in ("paragraph", "table") and b.text.strip() for b in doc.blocks)
        return len(docs)


@FUZZ
@given(suffix=st.sampled_from(sorted(LOADERS)), data=st.binary(max_size=2048))
def test_random_bytes(suffix: str, data: bytes) -> None:
    load_or_explain(suffix, data)


@FUZZ
@given(suffix=st.sampled_from([".txt", ".md", ".html", ".json", ".jsonl"]), text=st.text(max_size=600))
def test_random_text(suffix: str, text: str) -> None:
    load_or_explain(suffix, text.encode("utf-8"))


words = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=0, max_size=30)
md_line = st.one_of(
    st.builds(lambda n, t: "#" * n + " " + t, st.integers(1, 7), words),
    st.builds(lambda t: f"- {t}", words),
    st.builds(lambda t: f"1. {t}", words),
    st.builds(lambda t: f"> {t}", words),
    st.builds(lambda a, b: f"| {a} | {b} |", words, words),
    st.just("|---|---|"),
    st.just("```"),
    st.just("---"),
    st.just("==="),
    st.just(""),
    st.builds(lambda t: f"**{t}** and *{t}* and `{t}` and [{t}](http://x/{t})", words),
    words,
)


@FUZZ
@given(lines=st.lists(md_line, max_size=40))
def test_random_markdown_structures(lines: list[str]) -> None:
    n = load_or_explain(".md", "\n".join(lines).encode("utf-8"))
    assert n in (0, 1)


TAGS = ["div", "p", "h1", "h2", "h3", "table", "tr", "td", "th", "ul", "li", "dl", "dt", "dd", "span",
        "script", "style", "br", "section", "title", "head", "body", "pre", "svg", "b"]


@st.composite
def html_trees(draw: st.DrawFn, depth: int = 0) -> str:
    parts = []
    for _ in range(draw(st.integers(0, 4 if depth < 4 else 1))):
        kind = draw(st.sampled_from(["text", "tag", "tag", "broken", "entity", "comment"]))
        if kind == "text":
            parts.append(draw(words).replace("<", "&lt;"))
        elif kind == "entity":
            parts.append(draw(st.sampled_from(["&amp;", "&nbsp;", "&#x1F600;", "&bogus;", "&#0;", "<![CDATA[x]]>"])))
        elif kind == "comment":
            parts.append(f"<!-- {draw(words)} -->")
        elif kind == "broken":
            parts.append(draw(st.sampled_from(["<div", "</p>", "<td>", "</table></table>", "<p <p>", "<h1>"])))
        else:
            tag = draw(st.sampled_from(TAGS))
            inner = draw(html_trees(depth + 1)) if depth < 6 else ""
            parts.append(f"<{tag}>{inner}</{tag}>")
    return "".join(parts)


@FUZZ
@given(body=html_trees(), nest=st.integers(0, 3000))
def test_random_html_structures(body: str, nest: int) -> None:
    html = "<html><body>" + "<div>" * nest + body + "</div>" * nest + "</body></html>"
    assert load_or_explain(".html", html.encode("utf-8")) in (0, 1)


json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), words),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.sampled_from(["title", "text", "x", "docs"]), inner, max_size=3)),
    max_leaves=12,
)


@FUZZ
@given(value=json_values)
def test_random_json_corpora(value: object) -> None:
    import json

    load_or_explain(".json", json.dumps(value).encode("utf-8"))
    load_or_explain(".jsonl", "\n".join(json.dumps(v) for v in (value if isinstance(value, list) else [value])).encode())


@FUZZ
@given(cut=st.floats(0.0, 1.0), junk=st.binary(max_size=64))
def test_mangled_pdfs(cut: float, junk: bytes) -> None:
    from tests.indexing.pdfgen import text_ops

    ops = text_ops([(72, 700, 12, "The turbine is inspected every spring."), (72, 680, 12, "Blades last ten years.")])
    raw = _pdf_bytes(ops)
    i = int(len(raw) * cut)
    load_or_explain(".pdf", raw[:i] + junk + raw[i + len(junk):])


def _pdf_bytes(content: str) -> bytes:
    from tests.indexing.pdfgen import write_pdf

    with tempfile.TemporaryDirectory() as d:
        return write_pdf(Path(d) / "x.pdf", [content]).read_bytes()
