"""Vector and skeleton expanders: Route 1, sentence anchors, paragraph display, Strategy B.

The skeleton reference (skeleton-architecture.md) retrieves at two granularities:

* **Route 1** (``chunk_vector``): cosine search over TextChunk vectors, the baseline.
* **Sentence anchors** (``vector_anchors``): cosine search over Sentence vectors. Sentences
  are short (20-50 tokens), so their embeddings are precise; each anchor carries the
  denormalised skeleton metadata of its node (page, offsets, section, parent paragraph,
  prev/next ids) so later stages need no graph hop to display or cite it.
* **Strategy A** (``sentence_window``): "sentence search, paragraph display" - each anchor is
  shown as its parent paragraph (zero hop, from ``parent_paragraph_text``), widened by a
  NEXT/PREV window only when that paragraph is too short to give context.
* **Strategy B** (``skeleton_traverse``): anchor then expand along real edges - RELATED_TO
  (sparse cross-chunk kNN), NEXT/PREV within the chunk, PART_OF to the parent chunk - with an
  optional verify pass that uses RELATED_TO links *among* the anchors as corroboration.

Every stage keeps metadata in the evidence record, never in its text, so context assembly
cannot leak annotations such as ``[paragraph, sim=0.751]`` into a prompt.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, Literal

from graphroute.core.api.models import EdgeType, Evidence, Node, VectorSpace
from graphroute.core.api.stage import QueryState, Slot, Stage, StageContext, StageKind, StageParams
from graphroute.core.hookspecs import hookimpl
from graphroute.core.lib.fusion import rrf_merge
from graphroute.core.lib.layout import boxes_in, layout_of
from pydantic import Field

# Evidence.metadata["role"] values written by these stages.
ROLE_ANCHOR = "anchor"
ROLE_RELATED = "related"
ROLE_WINDOW = "window"
ROLE_PARENT_CHUNK = "parent_chunk"

# Sentence node properties copied into Evidence.metadata (the skeleton's unified metadata).
_SENTENCE_META_KEYS = (
    "parent_paragraph_id",
    "parent_paragraph_text",
    "parent_paragraph_layout",
    "prev_sentence_id",
    "next_sentence_id",
    "confidence",
)


# --------------------------------------------------------------------------- helpers


def _int_or_none(value: Any) -> int | None:
    if value is None:
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _title(props: dict[str, Any]) -> str:
    return str(props.get("title") or props.get("document") or "")


def sentence_evidence(node: Node, score: float, *, source: str, role: str) -> Evidence:
    """Evidence for one Sentence node, carrying everything a citation needs.

    Document title, section path, page and character span go into the Evidence fields
    (token_budget and the synthesizers cite from them); the structural metadata (parent
    paragraph, prev/next ids, extraction confidence, content-type tag, reading position) goes
    into ``metadata`` for the display and denoising stages.

    Offsets: the index stores a sentence's span within its paragraph (``char_offset``) and
    within its chunk (``chunk_char_offset``). Evidence uses the **chunk** frame whenever it is
    known (``metadata.offset_frame == "chunk"``, with ``Evidence.chunk_id``), the widest frame
    the skeleton keeps, so sentence, paragraph and chunk evidence cite in one frame.
    """
    p = node.props
    text = str(p.get("text") or "")
    meta: dict[str, Any] = {k: p.get(k) for k in _SENTENCE_META_KEYS if p.get(k) is not None}
    meta["role"] = role
    if p.get("source") is not None:
        meta["source_tag"] = p.get("source")  # content type: paragraph, table_row, ...
    if p.get("position") is not None:
        meta["position"] = p.get("position")
    length = _int_or_none(p.get("char_length"))
    in_paragraph = _int_or_none(p.get("char_offset"))
    in_chunk = _int_or_none(p.get("chunk_char_offset"))
    if in_paragraph is not None:
        meta["paragraph_char_offset"] = in_paragraph
    offset = in_chunk if in_chunk is not None else in_paragraph
    if offset is not None:
        meta["offset_frame"] = "chunk" if in_chunk is not None else "paragraph"
    layout = layout_of(p)
    if layout:
        meta["layout"] = layout  # chunk frame: citations narrow boxes to the cited characters
    return Evidence(
        id=node.id,
        text=text,
        score=float(score),
        kind="sentence",
        document=_title(p),
        document_id=node.doc_id or "",
        section_path=str(p.get("section_path") or ""),
        source=source,
        page=_int_or_none(p.get("page")),
        boxes=boxes_in(layout),
        char_offset=offset,
        char_length=length if length is not None else (len(text) if offset is not None else None),
        chunk_id=p.get("chunk_id"),
        metadata=meta,
    )


def chunk_evidence(node: Node, score: float, *, source: str, role: str | None = None) -> Evidence:
    """Evidence for one TextChunk node (Route 1 and Strategy B's parent chunks).

    Its span is the whole chunk in the chunk frame (offset 0), so a synthesizer that cites
    one sentence of it narrows the offsets inside the chunk, like for sentence evidence.
    """
    p = node.props
    text = str(p.get("text") or "")
    meta: dict[str, Any] = {"role": role} if role else {}
    meta["offset_frame"] = "chunk"
    if p.get("index") is not None:
        meta["chunk_index"] = p.get("index")
    layout = layout_of(p)
    if layout:
        meta["layout"] = layout
    return Evidence(
        id=node.id,
        text=text,
        score=float(score),
        kind="chunk",
        document=_title(p),
        document_id=node.doc_id or "",
        section_path=str(p.get("section_path") or ""),
        source=source,
        page=_int_or_none(p.get("page")),
        boxes=boxes_in(layout),
        char_offset=0,
        char_length=len(text),
        chunk_id=node.id,
        metadata=meta,
    )


def merge_evidence(pool: Sequence[Evidence], new: Iterable[Evidence]) -> tuple[list[Evidence], int]:
    """Union by id keeping the best score, pool order first; returns (merged, ids added)."""
    out = list(pool)
    where = {e.id: i for i, e in enumerate(out)}
    added = 0
    for e in new:
        i = where.get(e.id)
        if i is None:
            where[e.id] = len(out)
            out.append(e)
            added += 1
        elif e.score > out[i].score:
            out[i] = e
    return out, added


def _fetch(ctx: StageContext, ids: Iterable[str]) -> dict[str, Node]:
    wanted = list(dict.fromkeys(i for i in ids if i))
    if not wanted:
        return {}
    return {n.id: n for n in ctx.services.store.get_nodes(ctx.group, wanted)}


def search_evidence(
    state: QueryState,
    ctx: StageContext,
    space: str,
    top_k: int,
    min_score: float | None,
    to_evidence: Callable[[Node, float], Evidence],
) -> tuple[list[Evidence], int]:
    """The question's ``top_k`` nearest nodes in vector ``space`` (those scoring at least
    ``min_score``) as evidence, merged into ``state.evidence``.

    Route 1's chunk search and the sentence anchors are this one search over two spaces;
    only the evidence each hit becomes differs. Returns the evidence found, best first, and
    how many of them were new to the state."""
    hits = ctx.services.store.vector_search(ctx.group, space, ctx.query_vector(state.question), top_k)
    if min_score is not None:
        hits = [(i, s) for i, s in hits if s >= min_score]
    nodes = _fetch(ctx, (i for i, _ in hits))
    found = [to_evidence(nodes[i], s) for i, s in hits if i in nodes]
    state.evidence, added = merge_evidence(state.evidence, found)
    return found, added


def walk_window(
    ctx: StageContext,
    starts: Sequence[Node],
    window: int,
    *,
    skip_own_paragraph: bool = False,
) -> list[tuple[list[tuple[Node, int]], list[tuple[Node, int]]]]:
    """Reading-order neighbours of each start node, never leaving its chunk.

    For ``starts[i]`` returns ``(before, after)``: up to ``window`` sentences reached through
    ``prev_sentence_id`` / ``next_sentence_id`` (the denormalised NEXT edges), nearest first,
    each with its distance in sentences. A walk stops at the chunk edge (a neighbour whose
    ``chunk_id`` differs), at the document's first/last sentence, or at a cycle. With
    ``skip_own_paragraph``, sentences of the start's own paragraph are stepped over without
    counting (the display stage already shows that paragraph). Lookups are batched: one store
    read per step for all walks together.
    """
    results: list[tuple[list[tuple[Node, int]], list[tuple[Node, int]]]] = [([], []) for _ in starts]
    if window <= 0:
        return results
    # one walk per (start, direction): [index, direction, current node, distance, seen ids]
    walks: list[list[Any]] = []
    for i, node in enumerate(starts):
        for direction in ("prev_sentence_id", "next_sentence_id"):
            walks.append([i, direction, node, 0, {node.id}])
    while walks:
        nodes = _fetch(ctx, (str(w[2].props.get(w[1]) or "") for w in walks))
        alive: list[list[Any]] = []
        for w in walks:
            i, direction, current, dist, seen = w
            start = starts[i]
            nxt_id = current.props.get(direction)
            nxt = nodes.get(str(nxt_id)) if nxt_id else None
            if nxt is None or nxt.id in seen:
                continue
            if nxt.props.get("chunk_id") != start.props.get("chunk_id"):
                continue  # chunk edge: the window never crosses it
            seen.add(nxt.id)
            w[2] = nxt
            own = start.props.get("parent_paragraph_id")
            if skip_own_paragraph and own is not None and nxt.props.get("parent_paragraph_id") == own:
                alive.append(w)
                continue
            w[3] = dist + 1
            (results[i][0] if direction == "prev_sentence_id" else results[i][1]).append((nxt, dist + 1))
            if dist + 1 < window:
                alive.append(w)
        walks = alive
    return results


# --------------------------------------------------------------------------- Route 1


class ChunkVector(Stage):
    """Route 1: cosine search over chunk vectors; top-k chunks become evidence."""

    name = "chunk_vector"
    kind = StageKind.EXPANDER
    consumes = (Slot.QUERY,)
    produces = (Slot.EVIDENCE,)

    class Params(StageParams):
        top_k: int = Field(5, ge=1, le=1000, description="Chunks to retrieve (Route 1 default 5).")
        min_score: float | None = Field(
            None, ge=-1.0, le=1.0, description="Drop hits below this cosine (None: keep all top_k)."
        )

    params: Params

    def run(self, state: QueryState, ctx: StageContext) -> None:
        p = self.params
        found, added = search_evidence(
            state, ctx, VectorSpace.CHUNK, p.top_k, p.min_score, lambda n, s: chunk_evidence(n, s, source=self.name)
        )
        ctx.stats.update(
            {
                "hits": len(found),
                "added": added,
                "top_score": round(found[0].score, 6) if found else None,
            }
        )


# --------------------------------------------------------------------------- anchors


class VectorAnchors(Stage):
    """Sentence vector search: the top-k sentences become scored anchors (with skeleton metadata)."""

    name = "vector_anchors"
    kind = StageKind.EXPANDER
    consumes = (Slot.QUERY,)
    produces = (Slot.EVIDENCE,)

    class Params(StageParams):
        top_k: int = Field(
            8, ge=1, le=200, description="Anchor sentences to retrieve (reference range 5-10)."
        )
        min_score: float | None = Field(
            None, ge=-1.0, le=1.0, description="Drop anchors below this cosine (None: keep all top_k)."
        )

    params: Params

    def run(self, state: QueryState, ctx: StageContext) -> None:
        p = self.params
        anchors, added = search_evidence(
            state, ctx, VectorSpace.SENTENCE, p.top_k, p.min_score,
            lambda n, s: sentence_evidence(n, s, source=self.name, role=ROLE_ANCHOR),
        )
        ctx.stats.update(
            {
                "anchors": len(anchors),
                "added": added,
                "top_score": round(anchors[0].score, 6) if anchors else None,
            }
        )


# --------------------------------------------------------------------------- Strategy A


class SentenceWindow(Stage):
    """Sentence search, paragraph display: show each sentence as its parent paragraph (zero hop)."""

    name = "sentence_window"
    kind = StageKind.EXPANDER
    consumes = (Slot.EVIDENCE,)
    produces = (Slot.EVIDENCE,)

    class Params(StageParams):
        window: int = Field(
            2, ge=0, le=10,
            description="NEXT/PREV sentences added on each side when the paragraph is short "
            "(reference window 2; 0 = paragraph only). Never crosses a chunk edge.",
        )
        short_paragraph_chars: int = Field(
            200, ge=0, le=100_000,
            description="A paragraph shorter than this is widened by the window. 200 characters "
            "is about one reference-sized sentence (20-50 tokens), i.e. too little context alone.",
        )
        display: Literal["paragraph", "chunk"] = Field(
            "paragraph",
            description="paragraph: each sentence shown as its paragraph (widened when short); chunk: as its "
            "whole chunk (the passage dense and BM25 search hand over), one record per chunk, scored by its "
            "best sentence - for answers that sit in the passage around the sentence, not beside it.",
        )

    params: Params

    def run(self, state: QueryState, ctx: StageContext) -> None:
        if self.params.display == "chunk":
            self._chunks(state, ctx)
            return
        groups: dict[str, list[Evidence]] = {}
        order: list[tuple[str, str]] = []  # ("para", key) or ("keep", index) in input order
        passthrough: dict[str, Evidence] = {}
        for i, ev in enumerate(state.evidence):
            pid = ev.metadata.get("parent_paragraph_id") if ev.kind == "sentence" else None
            if ev.kind == "sentence" and pid and ev.metadata.get("parent_paragraph_text"):
                if pid not in groups:
                    groups[pid] = []
                    order.append(("para", pid))
                groups[pid].append(ev)
            else:
                key = f"#{i}"
                passthrough[key] = ev
                order.append(("keep", key))

        paragraphs = {pid: self._paragraph(pid, members) for pid, members in groups.items()}
        short = [pid for pid, ev in paragraphs.items() if len(ev.text) < self.params.short_paragraph_chars]
        widened = self._widen(ctx, short, groups, paragraphs) if self.params.window > 0 else 0

        out: list[Evidence] = []
        for kind, key in order:
            out.append(paragraphs[key] if kind == "para" else passthrough[key])
        state.evidence, _ = merge_evidence([], out)
        ctx.stats.update(
            {
                "sentences_in": sum(len(m) for m in groups.values()),
                "paragraphs": len(paragraphs),
                "merged_anchors": sum(len(m) - 1 for m in groups.values()),
                "short_paragraphs": len(short),
                "window_sentences": widened,
                "kept_as_is": len(passthrough),
            }
        )

    def _chunks(self, state: QueryState, ctx: StageContext) -> None:
        """Each sentence as its chunk, one record per chunk in the order of its first
        evidence, scored by its best sentence; a chunk already in the evidence (a passage
        search's hit) is that record too. Other evidence, and sentences whose chunk is gone,
        pass through."""
        nodes = _fetch(ctx, (e.chunk_id or "" for e in state.evidence if e.kind == "sentence" and e.chunk_id))
        out: list[Evidence] = []
        shown: dict[str, Evidence] = {}
        for ev in state.evidence:
            node = nodes.get(ev.chunk_id or "") if ev.kind == "sentence" else None
            if node is None and ev.kind != "chunk":
                out.append(ev)
                continue
            key = node.id if node is not None else ev.id
            record = shown.get(key)
            if record is None:
                if node is None:
                    record = ev.model_copy(update={"metadata": dict(ev.metadata)})
                else:
                    record = chunk_evidence(node, ev.score, source=ev.source, role=ev.metadata.get("role"))
                    record.document = record.document or ev.document
                    record.section_path = record.section_path or ev.section_path
                record.metadata.update({"display": "chunk", "anchors": []})
                shown[key] = record
                out.append(record)
            if node is not None:
                record.metadata["anchors"].append(
                    {"id": ev.id, "text": ev.text, "score": ev.score, "confidence": ev.metadata.get("confidence")})
                record.metadata["anchor_count"] = len(record.metadata["anchors"])
                record.metadata.setdefault("sentence_id", ev.id)
            record.score = max(record.score, ev.score)
        state.evidence = out
        ctx.stats.update(
            {"sentences_in": sum(len(r.metadata["anchors"]) for r in shown.values()), "chunks": len(shown),
             "kept_as_is": len(out) - len(shown)}
        )

    @staticmethod
    def _paragraph(pid: str, members: list[Evidence]) -> Evidence:
        """One paragraph record for all anchors that share it; scored by its best anchor.

        Zero hop: the text is the anchor's denormalised ``parent_paragraph_text`` and the
        paragraph's span is the anchor's span minus the anchor's offset inside the paragraph.
        """
        best = max(members, key=lambda e: e.score)
        text = str(best.metadata["parent_paragraph_text"])
        offset: int | None = None
        inner = best.metadata.get("paragraph_char_offset")
        if best.char_offset is not None and best.metadata.get("offset_frame") == "chunk" and isinstance(inner, int):
            offset = best.char_offset - inner
        elif best.char_offset is not None and best.metadata.get("offset_frame") == "paragraph":
            offset = 0
        anchors = [
            {
                "id": m.id,
                "text": m.text,
                "score": m.score,
                "char_offset": m.char_offset,
                "char_length": m.char_length,
                "page": m.page,
                "confidence": m.metadata.get("confidence"),
                "position": m.metadata.get("position"),
                "prev_sentence_id": m.metadata.get("prev_sentence_id"),
                "next_sentence_id": m.metadata.get("next_sentence_id"),
            }
            for m in sorted(members, key=lambda e: -e.score)
        ]
        meta = {
            k: v for k, v in best.metadata.items()
            if k not in ("parent_paragraph_text", "paragraph_char_offset", "parent_paragraph_layout", "layout")
        }
        layout = best.metadata.get("parent_paragraph_layout")
        if layout:
            meta["layout"] = layout
        confs = [a["confidence"] for a in anchors if a["confidence"] is not None]
        if confs:
            meta["confidence"] = max(confs)
        positions = [a["position"] for a in anchors if isinstance(a["position"], int)]
        if positions:
            meta["position"] = min(positions)
        meta.update({"display": "paragraph", "anchors": anchors, "anchor_count": len(anchors), "sentence_id": best.id})
        return best.model_copy(
            update={
                "id": pid,
                "kind": "paragraph",
                "text": text,
                "char_offset": offset,
                "char_length": len(text) if offset is not None else None,
                "boxes": boxes_in(layout) or best.boxes,
                "metadata": meta,
            }
        )

    def _widen(
        self,
        ctx: StageContext,
        short: list[str],
        groups: dict[str, list[Evidence]],
        paragraphs: dict[str, Evidence],
    ) -> int:
        """Add NEXT/PREV sentences around short paragraphs (one store read per step).

        The walk starts at the paragraph's best anchor and steps over the paragraph's own
        sentences, so the window is counted from the paragraph's edges, not the anchor's.
        """
        if not short:
            return 0
        best = {pid: max(groups[pid], key=lambda e: e.score).id for pid in short}
        nodes = _fetch(ctx, best.values())
        todo = [pid for pid in short if best[pid] in nodes]
        walks = walk_window(ctx, [nodes[best[pid]] for pid in todo], self.params.window, skip_own_paragraph=True)
        chunks = _fetch(ctx, (paragraphs[pid].chunk_id or "" for pid in todo))
        added = 0
        for pid, (before, after) in zip(todo, walks, strict=True):
            if not before and not after:
                continue
            b = [n for n, _ in reversed(before)]  # farthest first = reading order
            a = [n for n, _ in after]
            paragraphs[pid] = self._with_window(paragraphs[pid], b, a, chunks.get(paragraphs[pid].chunk_id or ""))
            added += len(b) + len(a)
        return added

    @staticmethod
    def _with_window(ev: Evidence, before: list[Node], after: list[Node], chunk: Node | None) -> Evidence:
        """Paragraph text widened by window sentences, as a verbatim slice of the chunk.

        All pieces lie in one chunk (the walk never crosses its edge), so with chunk-frame
        offsets the window is ``chunk.text[first start : last end]``: exact text, exact span.
        Without offsets the pieces are joined by spaces and the record is flagged
        ``text_stripped`` so citations do not narrow offsets inside it.
        """
        spans: list[tuple[int, int]] = []
        for n in [*before, *after]:
            o = _int_or_none(n.props.get("chunk_char_offset"))
            if o is not None:
                spans.append((o, o + len(str(n.props.get("text") or ""))))
        if ev.char_offset is not None:
            spans.append((ev.char_offset, ev.char_offset + len(ev.text)))
        chunk_text = str(chunk.props.get("text") or "") if chunk is not None else ""
        meta = {**ev.metadata, "display": "paragraph+window", "window_ids": [n.id for n in [*before, *after]]}
        exact = ev.metadata.get("offset_frame") == "chunk" and len(spans) == len(before) + len(after) + 1
        if exact and chunk_text:
            start, end = min(s for s, _ in spans), max(e for _, e in spans)
            if end <= len(chunk_text) and ev.text in chunk_text[start:end]:
                text = chunk_text[start:end]
                update: dict[str, Any] = {"text": text, "char_offset": start, "char_length": end - start, "metadata": meta}
                layout = layout_of(chunk.props) if chunk is not None else None
                if layout:
                    meta["layout"] = layout
                    update["boxes"] = boxes_in(layout, start, end)
                return ev.model_copy(update=update)
        pieces = [str(n.props.get("text") or "") for n in before] + [ev.text] + [str(n.props.get("text") or "") for n in after]
        meta["text_stripped"] = True
        return ev.model_copy(update={"text": " ".join(t for t in pieces if t), "metadata": meta})


# --------------------------------------------------------------------------- Strategy B


class SkeletonTraverse(Stage):
    """Strategy B: from sentence anchors, expand along RELATED_TO, NEXT/PREV and PART_OF edges."""

    name = "skeleton_traverse"
    kind = StageKind.EXPANDER
    consumes = (Slot.EVIDENCE,)
    produces = (Slot.EVIDENCE,)

    class Params(StageParams):
        decay: float = Field(
            0.8, gt=0.0, le=1.0,
            description="RELATED_TO hop discount: expanded score = anchor score x edge similarity x decay (reference 0.8).",
        )
        window: int = Field(
            2, ge=0, le=10,
            description="NEXT/PREV sentences on each side of an anchor, bounded by its chunk (reference 2).",
        )
        window_decay: float = Field(
            0.8, gt=0.0, le=1.0,
            description="Window discount per sentence of distance: score = anchor score x window_decay^d. "
            "Same one-hop discount as RELATED_TO, so a neighbour never outranks its anchor.",
        )
        related: bool = Field(True, description="Follow RELATED_TO (sparse cross-chunk kNN) edges.")
        parent_chunks: bool = Field(
            True,
            description="Add each anchor's parent chunk (PART_OF) as chunk evidence, scored best "
            "anchor x decay, with its section path: the reference's COLLECT step.",
        )
        verify: bool = Field(
            False,
            description="Before expanding, boost anchors with RELATED_TO links to other anchors "
            "and penalise isolated ones (reference 'verify + expand').",
        )
        verify_boost: float = Field(
            0.1, ge=0.0, le=1.0,
            description="Verify mode: an anchor's score is multiplied by 1 + verify_boost x "
            "(linked anchors, at most verify_max_links).",
        )
        verify_max_links: int = Field(
            2, ge=1, le=20, description="Verify mode: links counted per anchor at most (kNN k is 2)."
        )
        verify_penalty: float = Field(
            0.9, gt=0.0, le=1.0,
            description="Verify mode: multiplier for anchors with no link to another anchor. Applied "
            "only when at least one anchor pair is linked: with no links at all the check says nothing.",
        )
        placement: Literal["score", "append", "rrf"] = Field(
            "score",
            description="score: Strategy B evidence competes with the pool by raw score (the "
            "evidence list is re-sorted by score). append: "
            "it is ranked after the evidence already in the pool (scores shifted below the pool's "
            "lowest, order kept, raw score in metadata.skeleton_score), as the reference appended "
            "skeleton context to Route 2's. rrf: the pool's order and Strategy B's own order are fused "
            "by reciprocal rank, for a pool whose scores are not cosines (e.g. PPR mass).",
        )
        rrf_k: int = Field(60, ge=1, le=10_000, description="placement rrf: the k of 1 / (k + rank).")

    params: Params

    def run(self, state: QueryState, ctx: StageContext) -> None:
        p = self.params
        stats: dict[str, Any] = {
            "anchors": 0, "related_added": 0, "window_added": 0, "parent_chunks_added": 0,
            "verified_boosted": 0, "verified_penalised": 0,
        }
        ctx.stats.update(stats)
        anchors = [e for e in state.evidence if e.kind == "sentence" and e.metadata.get("role") == ROLE_ANCHOR]
        if not anchors:
            return
        anchor_ids = {e.id for e in anchors}
        pool = [e for e in state.evidence if e.id not in anchor_ids]
        store = ctx.services.store

        edges = store.edges_of(ctx.group, list(anchor_ids), [EdgeType.RELATED_TO], "both") if (p.related or p.verify) else []
        links: dict[str, set[str]] = {a: set() for a in anchor_ids}
        neighbours: dict[str, dict[str, float | None]] = {a: {} for a in anchor_ids}
        for e in edges:
            for a, other in ((e.src, e.dst), (e.dst, e.src)):
                if a not in anchor_ids or other == a:
                    continue
                sim = e.props.get("similarity")
                neighbours[a][other] = float(sim) if sim is not None else None
                if other in anchor_ids:
                    links[a].add(other)

        scored = {e.id: e.detached() for e in anchors}
        if p.verify and any(links.values()):
            for aid, ev in scored.items():
                n = min(len(links[aid]), p.verify_max_links)
                factor = 1.0 + p.verify_boost * n if n else p.verify_penalty
                ev.metadata["verify_links"] = len(links[aid])
                ev.metadata["verify_factor"] = factor
                ev.score *= factor
                stats["verified_boosted" if n else "verified_penalised"] += 1
        ranked = sorted(scored.values(), key=lambda e: -e.score)
        found: dict[str, Evidence] = {e.id: e for e in ranked}

        def offer(ev: Evidence) -> bool:
            """Dedup by sentence id, best score wins among expansions; an anchor is never
            replaced (reference: the vector ranking is preserved, expansion only adds)."""
            cur = found.get(ev.id)
            if cur is not None and cur.id in scored:
                return False
            if cur is None or ev.score > cur.score:
                found[ev.id] = ev
                return cur is None
            return False

        if p.related:
            stats["related_added"] = self._expand_related(ctx, ranked, neighbours, offer)
        if p.window > 0:
            stats["window_added"] = self._expand_window(ctx, ranked, offer)
        new = sorted(found.values(), key=lambda e: -e.score)
        if p.parent_chunks:
            chunks = self._parent_chunks(ctx, ranked)
            stats["parent_chunks_added"] = sum(1 for c in chunks if c.id not in {e.id for e in pool})
            new = sorted([*new, *chunks], key=lambda e: -e.score)
        if p.placement == "append":
            new = self._below(pool, new)
        stats["anchors"] = len(anchors)
        if p.placement == "rrf":
            state.evidence = rrf_merge([pool, new], p.rrf_k)
        else:
            state.evidence, _ = merge_evidence(pool, new)
        if p.placement == "score":  # list order follows the scores (rankings read the list)
            state.evidence.sort(key=lambda e: -e.score)
        ctx.stats.update(stats)

    def _expand_related(
        self,
        ctx: StageContext,
        anchors: list[Evidence],
        neighbours: dict[str, dict[str, float | None]],
        offer: Any,
    ) -> int:
        """One RELATED_TO hop: score = anchor score x edge similarity x decay."""
        other_ids = list(dict.fromkeys(o for a in anchors for o in neighbours[a.id]))
        if not other_ids:
            return 0
        nodes = _fetch(ctx, other_ids)
        missing = {o for a in anchors for o, s in neighbours[a.id].items() if s is None}
        if missing:  # an edge without a similarity property: measure it from the vectors
            self._fill_similarity(ctx, anchors, neighbours)
        added = 0
        for a in anchors:
            for oid, sim in neighbours[a.id].items():
                node = nodes.get(oid)
                if node is None or sim is None:
                    continue
                score = a.score * sim * self.params.decay
                ev = sentence_evidence(node, score, source=self.name, role=ROLE_RELATED)
                ev.metadata.update({"from_anchor": a.id, "edge_similarity": sim})
                added += offer(ev)
        return added

    @staticmethod
    def _fill_similarity(ctx: StageContext, anchors: list[Evidence], neighbours: dict[str, dict[str, float | None]]) -> None:
        import numpy as np

        ids = list(dict.fromkeys([a.id for a in anchors] + [o for a in anchors for o in neighbours[a.id]]))
        mat = ctx.services.store.get_vectors(ctx.group, VectorSpace.SENTENCE, ids)
        norms = np.linalg.norm(mat, axis=1)
        row = {i: k for k, i in enumerate(ids)}
        for a in anchors:
            for oid, sim in list(neighbours[a.id].items()):
                if sim is None:
                    i, j = row[a.id], row[oid]
                    denom = norms[i] * norms[j]
                    neighbours[a.id][oid] = float(mat[i] @ mat[j] / denom) if denom > 0 else None

    def _expand_window(self, ctx: StageContext, anchors: list[Evidence], offer: Any) -> int:
        """NEXT/PREV neighbours within the anchor's chunk: score = anchor x window_decay^d."""
        nodes = _fetch(ctx, (a.id for a in anchors))
        starts = [nodes[a.id] for a in anchors if a.id in nodes]
        by_id = {a.id: a for a in anchors}
        added = 0
        for node, (before, after) in zip(starts, walk_window(ctx, starts, self.params.window), strict=True):
            a = by_id[node.id]
            for n, d in [*before, *after]:
                ev = sentence_evidence(n, a.score * self.params.window_decay**d, source=self.name, role=ROLE_WINDOW)
                ev.metadata.update({"from_anchor": a.id, "distance": d})
                added += offer(ev)
        return added

    def _parent_chunks(self, ctx: StageContext, anchors: list[Evidence]) -> list[Evidence]:
        """PART_OF: each anchor's chunk with its section context, scored best anchor x decay."""
        best: dict[str, Evidence] = {}
        for a in anchors:
            if a.chunk_id and (a.chunk_id not in best or a.score > best[a.chunk_id].score):
                best[a.chunk_id] = a
        nodes = _fetch(ctx, best)
        out = []
        for cid, a in best.items():
            node = nodes.get(cid)
            if node is None:
                continue
            ev = chunk_evidence(node, a.score * self.params.decay, source=self.name, role=ROLE_PARENT_CHUNK)
            ev.section_path = ev.section_path or a.section_path
            ev.document = ev.document or a.document
            ev.metadata["anchors"] = [x.id for x in anchors if x.chunk_id == cid]
            out.append(ev)
        return out

    @staticmethod
    def _below(pool: list[Evidence], new: list[Evidence]) -> list[Evidence]:
        """Shift ``new`` scores below the pool's lowest, keeping their order and gaps."""
        if not pool or not new:
            return new
        floor = min(e.score for e in pool)
        top = max(e.score for e in new)
        if top < floor:
            return new
        shift = top - floor + 1e-6 * max(1.0, abs(floor))
        out = []
        for e in new:
            meta = {**e.metadata, "skeleton_score": e.score}
            out.append(e.model_copy(update={"score": e.score - shift, "metadata": meta}))
        return out


@hookimpl
def register_expanders() -> list[type[Stage]]:
    return [ChunkVector, VectorAnchors, SentenceWindow, SkeletonTraverse]
