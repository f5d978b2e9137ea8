"""Document -> deterministic skeleton: nodes and edges from parsing only.

The skeleton is the first layer of the index (skeleton reference, "The Three-Layer
Architecture"): Document > Section > Paragraph > Sentence, plus TextChunks (section-bounded,
or packed across sections with ``chunk_sections: pack``). Every edge here comes from the document's structure, never from an algorithm,
so it is exactly reproducible: node ids derive from the document id and positions.

Conventions (documented because retrieval stages rely on them):

* Every document has a **root section** named after its title (``section_path`` = title,
  level 0); headings become sections below it, so a path reads
  ``Title > Heading > Subheading``. Document -HAS_SECTION-> root only.
* A **paragraph** is a loader paragraph, or a whole table (its text is the linearised rows,
  one per line). A paragraph longer than ``chunk_max_tokens`` is split at sentence
  boundaries into several paragraphs so every paragraph fits in exactly one chunk.
* **Chunks** (``chunk_sections``): ``split`` starts a chunk at every section; ``pack`` fills
  a chunk with consecutive paragraphs of the document, across sections, while they fit in
  ``chunk_max_tokens``. A packed chunk's ``section_id`` / ``section_path`` are the deepest
  section holding all of its paragraphs; it has an IN_SECTION edge to each section whose
  paragraphs it holds, and its text names each of those sections on a line of its own
  (the path below the chunk's section) before their first paragraph. Paragraphs and
  sentences keep their own section either way.
* **Sentence offsets**: ``char_offset`` / ``char_length`` index into
  ``parent_paragraph_text``; ``chunk_char_offset`` indexes into the chunk's text (paragraphs
  and section lines joined by a blank line).
* **Confidence**: 1.0 for a sentence exactly as the segmenter produced it; 0.8 for a
  sentence that absorbed a fragment (too few words/characters) or was hard-cut because it
  was longer than a chunk: its boundaries are our guess, not the parser's.
* **Noise**: form labels (``Signature: ____``, ``Date:``) and lone numbers/punctuation are
  dropped; a sentence already seen in another chunk of the same document is dropped
  (cross-chunk dedup). Titles, KVPs and page headers are document metadata, not sentences.
* **Layout** (text from pages, e.g. PDF): a sentence's ``layout`` has one row
  ``[start, end, page, x0, top, x1, bottom]`` per line it spans, offsets in the chunk frame,
  PDF points from the page's top-left corner; paragraphs, chunks and
  ``parent_paragraph_layout`` hold their sentences' rows (:mod:`graphroute.core.lib.layout`).
* **NEXT** links consecutive sentences of one chunk in reading order (never across
  chunks), so chains are acyclic and chunk-local; ``prev_sentence_id`` /
  ``next_sentence_id`` mirror them.
"""

from __future__ import annotations

import hashlib
import itertools
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from graphroute.core.api.components import Block, SourceDocument, TextBox
from graphroute.core.api.models import Edge, EdgeType, Label, Node
from graphroute.core.lib.layout import LayoutRow, line_rows, paragraph_boxes, table_boxes

MERGED_CONFIDENCE = 0.8

# "Signature: ____", "Date: ......", "[ ] Yes": a form field left blank
_BLANK_FIELD = re.compile(r"^[^:\n]{1,40}:\s*(?:_{2,}|\.{3,}|-{3,}|\[\s*\]|☐)[\s_.\-]*$")
# "Name:", "Date of birth:": a bare label of at most three words
_BARE_LABEL = re.compile(r"^\w[\w'/()&#.-]*(?:\s+[\w'/()&#.-]+){0,2}\s*:\s*$")
_CHECKBOX = re.compile(r"^(?:\[\s*[xX]?\s*\]|☐|☑|☒)\s*\w{0,12}\.?$")
# lone numbers, page numbers, rules of dashes/underscores: no word characters besides digits
_LONE_NUMBER = re.compile(r"^[\s\W\d_]*$")


def is_noise(text: str) -> bool:
    """Form labels, blanks and lone numbers carry no retrievable content."""
    t = text.strip()
    return not t or any(p.match(t) for p in (_LONE_NUMBER, _BLANK_FIELD, _BARE_LABEL, _CHECKBOX))


def doc_id_for(source: str) -> str:
    """Deterministic document id from its source (absolute path, or ``path#i``)."""
    return "doc-" + hashlib.sha1(source.encode("utf-8")).hexdigest()[:16]


PATH_SEP = " > "  # between the titles of a section path


def label_prefix(title: str, section_path: str) -> str:
    """The label a sentence is embedded with (skeleton reference): the sentence alone lacks
    the context of where it stands."""
    return f"[Document: {title} | Section: {section_path}] "


def chunk_label_prefix(title: str, section_path: str, style: str) -> str:
    """What a TextChunk is embedded with. ``heading``: its section path as a heading line, the
    passage format small bi-encoders were trained on (title newline text). On the MuSiQue slice
    the packaged MiniLM's dense passage Recall@5 is 0.622 with the heading line and 0.576 with
    the bracket label, whose meta words dilute a 256-token mean-pooled vector."""
    if style == "brackets":
        return label_prefix(title, section_path)
    path = section_path if section_path.startswith(title) else f"{title}{PATH_SEP}{section_path}" if section_path else title
    return f"{path}\n"


def linearize_row(header: Sequence[str] | None, row: Sequence[str]) -> str:
    """``Header: val | Header: val`` (empty cells skipped)."""
    parts: list[str] = []
    for j, cell in enumerate(row):
        cell = cell.strip()
        if not cell:
            continue
        h = header[j].strip() if header is not None and j < len(header) else ""
        parts.append(f"{h}: {cell}" if h and h != cell else cell)
    return " | ".join(parts)


# --------------------------------------------------------------------------- plan


def _path_below(sec: SectionPlan, ancestor: SectionPlan) -> str:
    """``sec``'s path below ``ancestor``, one of its enclosing sections ("Rent > Late fees"
    below the root "Lease")."""
    return sec.path[len(ancestor.path) + len(PATH_SEP) :]


def _common_section(sections: Sequence[SectionPlan], by_id: dict[str, SectionPlan]) -> SectionPlan:
    """The deepest section holding all of ``sections`` (the first one when there is one)."""
    def chain(sec: SectionPlan) -> list[SectionPlan]:
        out = [sec]
        while out[-1].parent is not None:
            out.append(by_id[out[-1].parent])
        return out[::-1]  # root first

    common = chain(sections[0])
    for sec in sections[1:]:
        other = chain(sec)
        n = 0
        while n < min(len(common), len(other)) and common[n].id == other[n].id:
            n += 1
        common = common[:n]
    return common[-1]


@dataclass
class SectionPlan:
    id: str
    title: str
    path: str
    level: int
    parent: str | None
    index: int


@dataclass
class ParagraphPlan:
    section: SectionPlan
    text: str
    page: int | None
    kind: str  # "paragraph" | "figure_caption" | "table"
    rows: list[str] = field(default_factory=list)  # linearised table rows (tables only)
    boxes: list[TextBox] = field(default_factory=list)  # runs of ``text`` on the page (PDF)


@dataclass
class DocumentPlan:
    """A document's sections and paragraphs, before sentence segmentation."""

    doc: SourceDocument
    doc_id: str
    sections: list[SectionPlan]
    paragraphs: list[ParagraphPlan]
    metadata: dict[str, Any]

    def texts_to_segment(self) -> list[str]:
        return [p.text for p in self.paragraphs if p.kind != "table"]


def plan_document(doc: SourceDocument, doc_id: str | None = None) -> DocumentPlan:
    doc_id = doc_id or doc_id_for(doc.source)
    title = doc.title
    root = SectionPlan(id=f"{doc_id}:sec0", title=title, path=title, level=0, parent=None, index=0)
    sections = [root]
    stack: list[SectionPlan] = []
    paragraphs: list[ParagraphPlan] = []
    kvps: list[str] = []
    headers: list[str] = []
    for b in doc.blocks:
        current = stack[-1] if stack else root
        if b.kind == "heading" and b.text.strip():
            level = max(1, b.level)
            while stack and stack[-1].level >= level:
                stack.pop()
            parent = stack[-1] if stack else root
            sec = SectionPlan(
                id=f"{doc_id}:sec{len(sections)}", title=b.text.strip(),
                path=f"{parent.path}{PATH_SEP}{b.text.strip()}", level=level, parent=parent.id, index=len(sections),
            )
            sections.append(sec)
            stack.append(sec)
        elif b.kind in ("paragraph", "figure_caption") and b.text.strip():
            paragraphs.append(ParagraphPlan(
                section=current, text=b.text.strip(), page=b.page, kind=b.kind, boxes=paragraph_boxes(b.text, b.boxes),
            ))
        elif b.kind == "table" and b.rows:
            rows = [[c or "" for c in r] for r in b.rows]
            header = rows[0] if len(rows) > 1 else None
            first = 1 if len(rows) > 1 else 0
            kept = [(i, ln) for i, ln in ((i, linearize_row(header, rows[i])) for i in range(first, len(rows))) if ln]
            lines = [ln for _, ln in kept]
            if lines:
                paragraphs.append(ParagraphPlan(
                    section=current, text="\n".join(lines), page=b.page, kind="table", rows=lines,
                    boxes=table_boxes(b.boxes, kept),
                ))
        elif b.kind == "kvp" and b.text.strip():
            kvps.append(b.text.strip())
        elif b.kind == "page_header" and b.text.strip():
            headers.append(b.text.strip())
    meta = dict(doc.metadata)
    if kvps:
        meta["kvps"] = kvps
    if headers:
        meta["page_headers"] = headers
    return DocumentPlan(doc=doc, doc_id=doc_id, sections=sections, paragraphs=paragraphs, metadata=meta)


# --------------------------------------------------------------------------- build


@dataclass
class ParseLimits:
    """The subset of ``ParseSettings`` the builder needs (kept separate to stay testable)."""

    chunk_max_tokens: int = 512
    min_sentence_chars: int = 12
    min_sentence_words: int = 3
    label_prefix: bool = True
    cross_chunk_dedup: bool = True
    chunk_label: str = "heading"
    chunk_sections: str = "split"

    @classmethod
    def of(cls, parse: Any) -> ParseLimits:
        """The limits of an index profile's ``parse`` settings."""
        return cls(
            chunk_max_tokens=parse.chunk_max_tokens, min_sentence_chars=parse.min_sentence_chars,
            min_sentence_words=parse.min_sentence_words, label_prefix=parse.label_prefix,
            cross_chunk_dedup=parse.cross_chunk_dedup, chunk_label=parse.chunk_label,
            chunk_sections=parse.chunk_sections,
        )


@dataclass
class DocumentSkeleton:
    """Nodes, edges and the texts to embed for one document."""

    doc_id: str
    title: str
    nodes: list[Node]
    edges: list[Edge]
    sentence_ids: list[str]
    sentence_embed_texts: list[str]
    sentence_sections: list[str]  # section id of each sentence (for section vectors)
    chunk_ids: list[str]
    chunk_embed_texts: list[str]
    stats: dict[str, int]
    # each chunk embed text's heading (its label prefix), in characters
    chunk_heads: list[int] = field(default_factory=list)
    # each sentence's (chunk index, start, end) in its chunk's embed text
    sentence_spans: list[tuple[int, int, int]] = field(default_factory=list)


@dataclass
class _Sent:
    start: int
    end: int
    confidence: float
    source: str


def _words(text: str) -> int:
    return len(text.split())


def _refine_spans(
    text: str, spans: Sequence[tuple[int, int]], limits: ParseLimits, stats: dict[str, int], source: str = "paragraph"
) -> list[_Sent]:
    """Hard-cut over-long sentences, drop noise, merge fragments into a neighbour."""
    sents: list[_Sent] = []
    for a, b in spans:
        piece = text[a:b]
        if _words(piece) > limits.chunk_max_tokens:
            stats["hard_cut"] += 1
            for m in _word_windows(piece, limits.chunk_max_tokens):
                sents.append(_Sent(a + m[0], a + m[1], MERGED_CONFIDENCE, source))
        else:
            sents.append(_Sent(a, b, 1.0, source))
    kept: list[_Sent] = []
    for s in sents:
        if is_noise(text[s.start : s.end]):
            stats["noise_dropped"] += 1
        else:
            kept.append(s)

    def fragment(s: _Sent) -> bool:
        t = text[s.start : s.end]
        return _words(t) < limits.min_sentence_words or len(t) < limits.min_sentence_chars

    i = 0
    while len(kept) > 1 and i < len(kept):
        if fragment(kept[i]):
            if i > 0:
                kept[i - 1].end = kept[i].end
                kept[i - 1].confidence = MERGED_CONFIDENCE
                del kept[i]
                i -= 1  # the merged sentence may still be a fragment
            else:
                kept[1].start = kept[0].start
                kept[1].confidence = MERGED_CONFIDENCE
                del kept[0]
            stats["fragments_merged"] += 1
            continue
        i += 1
    return kept


def _word_windows(text: str, size: int) -> list[tuple[int, int]]:
    spans = [(m.start(), m.end()) for m in re.finditer(r"\S+", text)]
    return [(spans[i][0], spans[min(i + size, len(spans)) - 1][1]) for i in range(0, len(spans), size)]


def build_skeleton(
    plan: DocumentPlan,
    spans: Sequence[Sequence[tuple[int, int]]],
    group: str,
    limits: ParseLimits,
) -> DocumentSkeleton:
    """Turn a plan plus the segmenter's spans (one list per ``texts_to_segment()`` entry)
    into nodes and edges."""
    doc, doc_id, title = plan.doc, plan.doc_id, plan.doc.title
    stats = {"hard_cut": 0, "noise_dropped": 0, "fragments_merged": 0, "dedup_dropped": 0, "paragraphs_split": 0}
    nodes: list[Node] = []
    edges: list[Edge] = []

    def edge(src: str, dst: str, et: EdgeType) -> None:
        edges.append(Edge(src=src, dst=dst, type=et.value, group=group, doc_id=doc_id))

    # --- paragraphs with sentences; split over-long paragraphs at sentence boundaries
    span_iter = iter(spans)
    units: list[tuple[ParagraphPlan, str, list[_Sent], int]] = []  # (plan, text, sentences, offset in plan text)
    for p in plan.paragraphs:
        if p.kind == "table":
            sents, pos = [], 0
            for row in p.rows:
                sents.append(_Sent(pos, pos + len(row), 1.0, "table_row"))
                pos += len(row) + 1
        else:
            sents = _refine_spans(p.text, next(span_iter), limits, stats, p.kind)
        pieces: list[list[_Sent]] = [[]]
        tokens = 0
        for s in sents:
            w = _words(p.text[s.start : s.end])
            if pieces[-1] and tokens + w > limits.chunk_max_tokens:
                pieces.append([])
                tokens = 0
            pieces[-1].append(s)
            tokens += w
        if len(pieces) == 1:
            units.append((p, p.text, sents, 0))
            continue
        stats["paragraphs_split"] += 1
        for piece in pieces:
            a, b = piece[0].start, piece[-1].end
            rebased = [_Sent(s.start - a, s.end - a, s.confidence, s.source) for s in piece]
            units.append((p, p.text[a:b], rebased, a))

    # --- sections
    for sec in plan.sections:
        nodes.append(Node(id=sec.id, label=Label.SECTION.value, group=group, doc_id=doc_id, props={
            "title": sec.title, "path": sec.path, "section_path": sec.path, "level": sec.level, "index": sec.index,
            "document": title, "parent_section_id": sec.parent,
        }))
        edge(sec.id, doc_id, EdgeType.IN_DOCUMENT)
        if sec.parent is None:
            edge(doc_id, sec.id, EdgeType.HAS_SECTION)
        else:
            edge(sec.id, sec.parent, EdgeType.SUBSECTION_OF)

    # --- chunks: greedy packing of consecutive paragraphs, of one section or across sections
    pack = limits.chunk_sections == "pack"
    chunks: list[list[int]] = []  # unit indexes per chunk
    chunk_tokens = 0
    last_section: str | None = None
    for ui, (p, text, _sents, _base) in enumerate(units):
        w = _words(text)
        if pack and p.section.id != last_section and p.section.parent is not None:
            # the section's line in the chunk's text: at most its path below the root's
            w += _words(_path_below(p.section, plan.sections[0]))
        if not chunks or (p.section.id != last_section and not pack) or chunk_tokens + w > limits.chunk_max_tokens:
            chunks.append([])
            chunk_tokens = 0
        chunks[-1].append(ui)
        chunk_tokens += w
        last_section = p.section.id
    by_id = {sec.id: sec for sec in plan.sections}

    sentence_ids: list[str] = []
    sentence_texts: list[str] = []
    sentence_sections: list[str] = []
    chunk_ids: list[str] = []
    chunk_texts: list[str] = []
    chunk_heads: list[int] = []
    sentence_spans: list[tuple[int, int, int]] = []
    seen: dict[str, str] = {}  # normalised sentence -> chunk id (cross-chunk dedup)
    par_no = 0
    for ci, members in enumerate(chunks):
        chunk_id = f"{doc_id}:chk{ci}"
        member_sections = list({units[ui][0].section.id: units[ui][0].section for ui in members}.values())
        section = _common_section(member_sections, by_id)
        blocks_text: list[str] = []  # the chunk's text: its paragraphs, and a line naming each section it enters
        block_at: dict[int, int] = {}  # unit index -> its place in blocks_text
        entered = section.id
        for ui in members:
            own = units[ui][0].section
            if own.id != entered:
                blocks_text.append(_path_below(own, section))  # own lies below section: document order never returns to it
                entered = own.id
            block_at[ui] = len(blocks_text)
            blocks_text.append(units[ui][1])
        chunk_text = "\n\n".join(blocks_text)
        starts = list(itertools.accumulate((len(x) + 2 for x in blocks_text[:-1]), initial=0))
        chunk_prefix = chunk_label_prefix(title, section.path, limits.chunk_label) if limits.label_prefix else ""
        pages = [units[ui][0].page for ui in members if units[ui][0].page is not None]
        chunk_sentences: list[tuple[str, dict[str, Any]]] = []
        chunk_layout: list[LayoutRow] = []
        for ui in members:
            p, text, sents, base = units[ui]
            offset = starts[block_at[ui]]
            own = p.section
            par_id = f"{doc_id}:par{par_no}"
            par_no += 1
            par_props: dict[str, Any] = {
                "text": text, "kind": p.kind, "section_path": own.path, "section_id": own.id,
                "page": p.page, "chunk_id": chunk_id, "document": title, "chunk_char_offset": offset,
            }
            nodes.append(Node(id=par_id, label=Label.PARAGRAPH.value, group=group, doc_id=doc_id, props=par_props))
            edge(par_id, own.id, EdgeType.PART_OF)
            edge(par_id, chunk_id, EdgeType.PART_OF)
            # where each sentence sits on the page: one layout row per line, chunk frame
            layouts = [line_rows(p.boxes, base + s.start, base + s.end, offset - base) for s in sents] if p.boxes else []
            par_layout = [row for rows in layouts for row in rows]
            if par_layout:
                par_props["layout"] = par_layout
                chunk_layout.extend(par_layout)
            for si, s in enumerate(sents):
                stext = text[s.start : s.end]
                key = " ".join(stext.lower().split())
                if limits.cross_chunk_dedup and seen.get(key, chunk_id) != chunk_id:
                    stats["dedup_dropped"] += 1
                    continue
                seen.setdefault(key, chunk_id)
                chunk_sentences.append((par_id, {
                    "text": stext, "source": s.source, "page": p.page,
                    "char_offset": s.start, "char_length": s.end - s.start,
                    "chunk_char_offset": offset + s.start,
                    "section_path": own.path, "section_id": own.id,
                    "parent_paragraph_id": par_id, "parent_paragraph_text": text,
                    "chunk_id": chunk_id, "document": title, "confidence": s.confidence,
                }))
                if layouts and layouts[si]:
                    chunk_sentences[-1][1].update(page=layouts[si][0][2], layout=layouts[si], parent_paragraph_layout=par_layout)
        # sentences of this chunk, in reading order, with NEXT links inside the chunk only
        ids = [f"{doc_id}:sen{len(sentence_ids) + j}" for j in range(len(chunk_sentences))]
        for j, (par_id, props) in enumerate(chunk_sentences):
            sid = ids[j]
            props["prev_sentence_id"] = ids[j - 1] if j > 0 else None
            props["next_sentence_id"] = ids[j + 1] if j + 1 < len(ids) else None
            props["position"] = len(sentence_ids)
            nodes.append(Node(id=sid, label=Label.SENTENCE.value, group=group, doc_id=doc_id, props=props))
            edge(sid, par_id, EdgeType.PART_OF)
            edge(sid, chunk_id, EdgeType.PART_OF)
            if j > 0:
                edge(ids[j - 1], sid, EdgeType.NEXT)
            prefix = label_prefix(title, props["section_path"]) if limits.label_prefix else ""
            start = len(chunk_prefix) + props["chunk_char_offset"]
            sentence_spans.append((ci, start, start + props["char_length"]))
            sentence_ids.append(sid)
            sentence_texts.append(prefix + props["text"])
            sentence_sections.append(props["section_id"])
        nodes.append(Node(id=chunk_id, label=Label.CHUNK.value, group=group, doc_id=doc_id, props={
            "text": chunk_text, "section_path": section.path, "section_id": section.id, "index": ci,
            "document": title, "page": pages[0] if pages else None, "tokens": _words(chunk_text),
            "sentence_count": len(chunk_sentences), **({"layout": chunk_layout} if chunk_layout else {}),
        }))
        for sec in member_sections:
            edge(chunk_id, sec.id, EdgeType.IN_SECTION)
        edge(chunk_id, doc_id, EdgeType.IN_DOCUMENT)
        chunk_ids.append(chunk_id)
        chunk_texts.append(chunk_prefix + chunk_text)
        chunk_heads.append(len(chunk_prefix))

    nodes.insert(0, Node(id=doc_id, label=Label.DOCUMENT.value, group=group, doc_id=doc_id, props={
        "title": title, "source": doc.source, "content_hash": doc.content_hash,
        "sentence_count": len(sentence_ids), "chunk_count": len(chunk_ids), "metadata": plan.metadata,
    }))
    stats.update(sentences=len(sentence_ids), chunks=len(chunk_ids), paragraphs=par_no, sections=len(plan.sections))
    return DocumentSkeleton(
        doc_id=doc_id, title=title, nodes=nodes, edges=edges, sentence_ids=sentence_ids,
        sentence_embed_texts=sentence_texts, sentence_sections=sentence_sections,
        chunk_ids=chunk_ids, chunk_embed_texts=chunk_texts, stats=stats,
        chunk_heads=chunk_heads, sentence_spans=sentence_spans,
    )


def skeletons(
    plans: Sequence[DocumentPlan],
    split: Callable[[Sequence[str]], list[list[tuple[int, int]]]],
    group: str,
    limits: ParseLimits,
) -> list[DocumentSkeleton]:
    """Segment every plan's paragraphs in one batch, then build each skeleton."""
    texts: list[str] = []
    for p in plans:
        texts.extend(p.texts_to_segment())
    all_spans = split(texts) if texts else []
    out: list[DocumentSkeleton] = []
    i = 0
    for p in plans:
        n = len(p.texts_to_segment())
        out.append(build_skeleton(p, all_spans[i : i + n], group, limits))
        i += n
    return out


__all__ = [
    "MERGED_CONFIDENCE",
    "Block",
    "DocumentPlan",
    "DocumentSkeleton",
    "ParseLimits",
    "build_skeleton",
    "chunk_label_prefix",
    "doc_id_for",
    "is_noise",
    "label_prefix",
    "linearize_row",
    "plan_document",
    "skeletons",
]
