"""BM25 baseline: lexical passage search over the group's chunk texts (bm25s).

The baseline every graph route is compared with (HippoRAG reports BM25 next to dense
retrieval). The index is built lazily, in memory, once per (store, group, store version):
any write to the group changes the version, so a re-indexed corpus is never searched with a
stale index. Tokenisation is bm25s' default (lower case, ``\\w\\w+`` tokens) with its English
stop words; PyStemmer's English stemmer is used when that package is installed.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from graphroute.core.api.models import Evidence, Label, Node
from graphroute.core.api.stage import QueryState, Slot, Stage, StageContext, StageKind, StageParams
from graphroute.core.api.store import GraphStore, cache_token, document_titles, read_version
from graphroute.core.hookspecs import hookimpl
from graphroute.core.lib.layout import boxes_in, layout_of
from graphroute.plugins.expanders.vector import ROLE_ANCHOR, sentence_evidence
from pydantic import Field

_CACHE_SIZE = 4  # (store, group, version, params) indexes kept in memory


@dataclass
class _ChunkRecord:
    id: str
    text: str
    document: str
    document_id: str
    section_path: str
    page: int | None
    layout: list[Any] | None = None


@dataclass
class _LexicalIndex:
    retriever: Any  # bm25s.BM25, or None when the group has no chunk text
    chunks: list[_ChunkRecord]
    stemmer: Any


_lock = threading.Lock()
_cache: OrderedDict[tuple[Any, ...], _LexicalIndex] = OrderedDict()


def _stemmer() -> Any:
    """PyStemmer's English stemmer when installed, else None (no stemming)."""
    try:
        import Stemmer  # type: ignore[import-not-found]
    except ImportError:
        return None
    return Stemmer.Stemmer("english")


def _tokenize(texts: list[str], stemmer: Any) -> list[list[str]]:
    import bm25s

    tokens = bm25s.tokenize(texts, stopwords="en", stemmer=stemmer, return_ids=False, show_progress=False)
    return [list(t) for t in tokens]


def _chunk_records(store: GraphStore, group: str, label: Label = Label.CHUNK) -> list[_ChunkRecord]:
    """Every node of the group with that label (chunks, or sentences) with its document title,
    in a stable (id) order."""
    titles = document_titles(store, group)
    out = [r for r in (_record(node, titles) for node in store.iter_nodes(group, label)) if r.text.strip()]
    out.sort(key=lambda r: r.id)
    return out


def _record(node: Node, titles: dict[str, str]) -> _ChunkRecord:
    """A chunk node as the search shows it (its document's title, else the one it carries)."""
    doc_id = node.doc_id or str(node.props.get("document_id") or "")
    page = node.props.get("page")
    return _ChunkRecord(
        id=node.id,
        text=str(node.props.get("text") or ""),
        document=titles.get(doc_id) or str(node.props.get("document") or node.props.get("title") or ""),
        document_id=doc_id,
        section_path=str(node.props.get("section_path") or ""),
        page=page if isinstance(page, int) else None,
        layout=layout_of(node.props),
    )


def lexical_index(
    store: GraphStore, group: str, *, include_title: bool, k1: float, b: float, label: Label = Label.CHUNK
) -> _LexicalIndex:
    """The group's BM25 index over its chunks (or its sentences), built on first use and
    cached per store version."""
    key = (cache_token(store), group, read_version(store, group), include_title, k1, b, label)
    with _lock:
        hit = _cache.get(key)
        if hit is not None:
            _cache.move_to_end(key)
            return hit
    import bm25s

    chunks = _chunk_records(store, group, label)
    stemmer = _stemmer()
    texts = [f"{c.document}\n{c.text}" if include_title and c.document else c.text for c in chunks]
    retriever = None
    if chunks:
        retriever = bm25s.BM25(k1=k1, b=b)
        retriever.index(_tokenize(texts, stemmer), show_progress=False)
    built = _LexicalIndex(retriever=retriever, chunks=chunks, stemmer=stemmer)
    with _lock:
        _cache[key] = built
        while len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)
    return built


def ranked_scores(index: _LexicalIndex, question: str, top_k: int) -> list[tuple[int, float]]:
    """(chunk position in ``index.chunks``, BM25 score) of the question's best ``top_k`` chunks
    with a positive score, best first; ties broken by chunk order, so runs are reproducible."""
    query_tokens = _tokenize([question], index.stemmer)[0]
    if index.retriever is None or not query_tokens:
        return []
    scores = np.asarray(index.retriever.get_scores(query_tokens), dtype=np.float64)
    order = np.lexsort((np.arange(len(scores)), -scores))[:top_k]
    # a chunk without any query term is not a hit
    return [(int(i), float(scores[i])) for i in order if scores[i] > 0.0]


def lead(scores: list[float], rank: int) -> float:
    """How far BM25's best hit stands out: its score over the score at ``rank`` (1-based;
    a rank past the hits, or one scoring 0, counts as no competition: infinite lead). A
    ranking whose first ``rank`` hits score alike matches many passages on the question's
    words equally well, so its order says little about which one answers."""
    if not scores or scores[0] <= 0.0:
        return 0.0
    if len(scores) < rank or scores[rank - 1] <= 0.0:
        return float("inf")
    return scores[0] / scores[rank - 1]


@dataclass
class LexicalHits:
    """The question's best chunks by BM25, best first, and where they were ranked."""

    hits: list[tuple[str, float]]  # (chunk id, BM25 score)
    records: list[_ChunkRecord] | None  # each hit's chunk, when the client's index ranked them
    engine: str
    index: _LexicalIndex | None = None  # the client's index, when it ranked them
    lead: float | None = None  # lead(scores, lead_rank) when a minimum lead was asked for
    withheld: bool = False  # the ranking's lead was below the minimum: no hits returned

    def gate_stats(self) -> dict[str, Any]:
        """The lead and whether it withheld the hits, for a stage's trace (empty without a gate)."""
        if self.lead is None:
            return {}
        return {"lead": round(self.lead, 4) if self.lead != float("inf") else "inf", "withheld": self.withheld}


def lexical_hits(
    store: GraphStore, group: str, question: str, top_k: int, *, engine: str = "auto",
    include_title: bool = True, k1: float = 1.5, b: float = 0.75, min_lead: float = 1.0, lead_rank: int = 5,
    label: Label = Label.CHUNK,
) -> LexicalHits:
    """The question's best ``top_k`` chunks (or sentences, by ``label``) by BM25: with
    ``engine`` auto, the store's own full-text index where it keeps one for the group
    (:meth:`GraphStore.search_text`; nothing of the group is held in the client), else bm25s
    over an index of the group's chunks (or sentences) built in the client (titles included
    with ``include_title``; ``k1`` and ``b`` are bm25s'). What the bm25 stage and
    ``passage_seeds`` (``source: bm25``) rank by.

    ``min_lead`` above 1: no hits (``withheld``) unless the best hit scores at least
    ``min_lead`` times the hit at ``lead_rank`` (:func:`lead`)."""
    gated = min_lead > 1.0
    asked = max(top_k, lead_rank) if gated else top_k
    found = store.search_text(group, question, asked, label=label) if engine == "auto" else None
    if found is not None:
        out = LexicalHits(found, None, "store full-text index")
    else:
        index = lexical_index(store, group, include_title=include_title, k1=k1, b=b, label=label)
        ranked = ranked_scores(index, question, asked)
        out = LexicalHits([(index.chunks[i].id, score) for i, score in ranked], [index.chunks[i] for i, _ in ranked],
                          "bm25s in the client", index)
    if gated:
        out.lead = lead([s for _, s in out.hits], lead_rank)
        out.withheld = out.lead < min_lead
        keep = 0 if out.withheld else top_k
        out.hits = out.hits[:keep]
        out.records = None if out.records is None else out.records[:keep]
    return out


class BM25Search(Stage):
    """Lexical BM25 search over the group's chunks (bm25s baseline), or over its sentences as
    anchors for sentence routes (``unit: sentence``)."""

    name = "bm25"
    kind = StageKind.EXPANDER
    consumes = (Slot.QUERY,)
    produces = (Slot.EVIDENCE,)

    class Params(StageParams):
        top_k: int = Field(10, ge=1, le=1000, description="how many chunks to return, best first")
        include_title: bool = Field(
            True, description="index the document title with the chunk text (HippoRAG's BM25 does)"
        )
        k1: float = Field(1.5, ge=0.0, le=10.0, description="BM25 term-frequency saturation (bm25s default)")
        b: float = Field(0.75, ge=0.0, le=1.0, description="BM25 length normalisation (bm25s default)")
        unit: Literal["chunk", "sentence"] = Field(
            "chunk",
            description="chunk: passages (the baseline); sentence: single sentences, each returned as an "
            "anchor with its paragraph and neighbours, like `vector_anchors` - the lexical half of a sentence "
            "route (names, codes and rare words a sentence vector misses). Ranked as `engine` says, like chunks "
            "(Neo4j: a full-text index of the sentences, apart from the chunks').",
        )
        engine: Literal["auto", "client"] = Field(
            "auto",
            description="auto: the store's own full-text index where it keeps one (Neo4j: Lucene's English "
            "analyzer and BM25, always with the title; k1 and b are the index's), else bm25s in the client; "
            "client: always bm25s over an index of the group's chunks (or sentences) built in the client.",
        )
        min_lead: float = Field(
            1.0, ge=1.0, le=100.0,
            description="Chunks only: return nothing unless the best chunk's BM25 score is at least this many "
            "times the score at `lead_rank` (1: always return). A flat ranking means many passages share the "
            "question's words equally, and the order among them is noise to a route that fuses it with others.",
        )
        lead_rank: int = Field(5, ge=2, le=1000, description="The rank whose score `min_lead` compares the best hit with.")

    params: Params

    def run(self, state: QueryState, ctx: StageContext) -> None:
        p = self.params
        store = ctx.services.store
        if p.unit == "sentence":
            self._sentences(state, ctx)
            return
        found = lexical_hits(store, ctx.group, state.question, p.top_k, engine=p.engine,
                             include_title=p.include_title, k1=p.k1, b=p.b, min_lead=p.min_lead, lead_rank=p.lead_rank)
        if found.records is None:  # ranked in the database: nothing of the group is held here
            nodes = {n.id: n for n in store.get_nodes(ctx.group, [i for i, _ in found.hits])}
            hits = [self._evidence(_record(nodes[i], {}), score) for i, score in found.hits if i in nodes]
        else:
            hits = [self._evidence(c, score) for c, (_, score) in zip(found.records, found.hits, strict=True)]
        if found.index is not None:
            ctx.stats["indexed_chunks"] = len(found.index.chunks)
            ctx.stats["query_terms"] = len(_tokenize([state.question], found.index.stemmer)[0])
        self._add(state, hits)
        ctx.stats.update({"engine": found.engine, "hits": len(hits), **found.gate_stats()})

    def _sentences(self, state: QueryState, ctx: StageContext) -> None:
        """The question's best sentences by BM25 (each with its document title when
        ``include_title``), as anchors carrying the skeleton metadata of their node."""
        p = self.params
        store = ctx.services.store
        found = lexical_hits(store, ctx.group, state.question, p.top_k, engine=p.engine, include_title=p.include_title,
                             k1=p.k1, b=p.b, label=Label.SENTENCE)
        nodes = {n.id: n for n in store.get_nodes(ctx.group, [i for i, _ in found.hits])}
        hits = [sentence_evidence(nodes[i], s, source=self.name, role=ROLE_ANCHOR) for i, s in found.hits if i in nodes]
        self._add(state, hits)
        if found.index is not None:
            ctx.stats["indexed_sentences"] = len(found.index.chunks)
        ctx.stats.update({"engine": found.engine, "hits": len(hits)})

    def _evidence(self, c: _ChunkRecord, score: float) -> Evidence:
        return Evidence(
            id=c.id, text=c.text, score=score, kind="chunk", document=c.document, document_id=c.document_id,
            section_path=c.section_path, source=self.name, page=c.page, boxes=boxes_in(c.layout), chunk_id=c.id,
            metadata={"layout": c.layout} if c.layout else {},
        )

    @staticmethod
    def _add(state: QueryState, hits: list[Evidence]) -> None:
        known = {e.id for e in state.evidence}
        state.evidence.extend(e for e in hits if e.id not in known)


@hookimpl
def register_expanders() -> list[type[Stage]]:
    return [BM25Search]
