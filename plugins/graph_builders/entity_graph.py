"""The entity side of the index (LazyGraphRAG + HippoRAG 2, route2 reference §1-2).

Four index steps, run in profile order after the skeleton is written:

* ``entity_graph``  - extract entities (and triples) from TextChunks; Entity nodes, MENTIONS
  (chunk and sentence -> entity), RELATION (triples) or CO_OCCURS (no triples) edges, and
  entity-name vectors. PPR path 1 and the entity -> chunk hop.
* ``entity_knn``    - SEMANTICALLY_SIMILAR entity <-> entity (PPR path 3).
* ``hub_entities``  - HAS_HUB_ENTITY section -> entity and SHARES_ENTITY section <-> section
  across documents (PPR paths 4 and 5).
* ``communities``   - Leiden/Louvain on the entity graph; ``community`` on entities,
  Community nodes with summary and embedding, BELONGS_TO.

Incrementality: extraction is the expensive part, so it is cached per chunk content hash
(``<cache_dir>/extractions``); the derived layers themselves are rebuilt whole from the
cache whenever a document changed, which keeps aggregate properties (mention counts,
aliases, display names) exact and deletes entities orphaned by a removed document. Each
step records a *build token* in group metadata; a downstream step rebuilds when the
token it was built from changed, so a changed extractor rebuilds kNN and communities too.

The pure algorithms (graph building from extractions, kNN pairs, hubs, communities,
extractive summaries) are module functions with no store access, tested on small inputs.
"""

from __future__ import annotations

import itertools
import json
import logging
import math
import statistics
import threading
import time
from array import array
from collections import Counter, defaultdict
from collections.abc import Callable, Container, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from graphroute.core.api.components import (
    ComponentParams,
    Extraction,
    Extractor,
    IndexStep,
    LLMClient,
    LLMResponse,
)
from graphroute.core.api.models import Edge, EdgeType, Label, Node, VectorSpace, content_hash
from graphroute.core.api.store import batched, document_titles
from graphroute.core.hookspecs import hookimpl
from graphroute.core.lib import progress
from graphroute.core.lib.entities import (
    ENTITY_ID_PREFIX,
    OWN_PAGES_META,
    EntityTable,
    normalize_name,
    own_page_entity,
)
from graphroute.core.lib.knn import normalise_in_place
from graphroute.core.lib.phases import enter_phase, release_free_memory
from pydantic import BaseModel, Field

if TYPE_CHECKING:
    from graphroute.core.api.components import IndexContext
    from graphroute.core.api.store import GraphStore

log = logging.getLogger(__name__)

COMMUNITY_ID_PREFIX = "comm:"
EDGE_BATCH = 20_000
META_PREFIX = "entities."  # group meta keys of these steps: entities.<step>


# =========================================================================== pure algorithms


@dataclass
class ChunkInput:
    """A TextChunk and its sentences, as the graph builder needs them."""

    id: str
    doc_id: str
    text: str
    title: str | None = None
    sentences: list[tuple[str, str]] = field(default_factory=list)  # (sentence id, text)


@dataclass
class EntityLayer:
    """Output of :func:`build_entity_layer`: what the ``entity_graph`` step writes."""

    entities: list[Node]
    edges: list[Edge]
    stats: dict[str, Any]


@dataclass
class StreamedEntityLayer:
    """The same layer with its edges produced on demand (:meth:`iter_edges`, same edges in
    the same order as :attr:`EntityLayer.edges`).

    Why: the edges are most of the layer - 168k CO_OCCURS and 127k MENTIONS edges for 20k
    synthetic sentences - and as ``Edge`` objects they hold ~400 MB at once (tracemalloc,
    ``build_entity_layer`` at 20k sentences), growing with the corpus; the step writes them
    in bounded batches, so only the compact aggregates stay whole."""

    entities: list[Node]
    stats: dict[str, Any]
    edge_count: int
    _make_edges: Callable[[], Iterator[Edge]] = field(repr=False)

    def iter_edges(self) -> Iterator[Edge]:
        return self._make_edges()


def _padded(text: str) -> str:
    return f" {normalize_name(text)} "


def _owner(docs: set[str]) -> str | None:
    """An aggregated edge is owned by its document when only one document supports it."""
    return next(iter(docs)) if len(docs) == 1 else None


def build_entity_layer(
    group: str,
    chunks: Sequence[ChunkInput],
    extractions: Mapping[str, Extraction],
    *,
    co_occurrence: Literal["auto", "always", "never"] = "auto",
    max_co_occurring: int = 30,
    min_chars: int = 2,
) -> EntityLayer:
    """:func:`stream_entity_layer` with every edge built (see there)."""
    layer = stream_entity_layer(
        group, chunks, extractions, co_occurrence=co_occurrence, max_co_occurring=max_co_occurring, min_chars=min_chars
    )
    return EntityLayer(layer.entities, list(layer.iter_edges()), layer.stats)


def stream_entity_layer(
    group: str,
    chunks: Sequence[ChunkInput],
    extractions: Mapping[str, Extraction],
    *,
    co_occurrence: Literal["auto", "always", "never"] = "auto",
    max_co_occurring: int = 30,
    min_chars: int = 2,
) -> StreamedEntityLayer:
    """Merge per-chunk extractions into Entity nodes and entity edges.

    * Entities: every extracted name plus the subjects and objects of triples, merged by
      :func:`normalize_name`; display name = most frequent surface form; aliases = all.
    * MENTIONS chunk -> entity (``count`` = sentences of the chunk mentioning it, at least
      1) and sentence -> entity when the entity's normalised name occurs in the sentence's
      normalised text (case, punctuation and possessives folded alike).
    * RELATION subject -> object per distinct pair, ``relation`` = the most frequent
      relation text (all kept in ``relations``), ``count`` = supporting triples.
    * CO_OCCURS between the entities of a chunk that has no triples (``auto``), once per
      pair with ``count`` = chunks. Only the ``max_co_occurring`` entities mentioned most in
      a chunk take part, bounding a chunk's pairs (quadratic) by a constant.

    Edges that aggregate several documents carry ``doc_id`` None and list ``docs``; the
    step rebuilds the layer whenever any document changes, so ownership never goes stale.
    """
    table = EntityTable(min_chars=min_chars)
    # compact mention records (shared id strings), turned into Edges only when written
    chunk_mentions: list[tuple[str, str, str, int]] = []  # (chunk, doc, entity, count)
    sentence_mentions: list[tuple[str, str, str]] = []  # (sentence, doc, entity)
    mention_totals: Counter[str] = Counter()
    rel_texts: dict[tuple[str, str], Counter[str]] = defaultdict(Counter)
    rel_docs: dict[tuple[str, str], set[str]] = defaultdict(set)
    co_counts: Counter[tuple[str, str]] = Counter()
    co_docs: dict[tuple[str, str], set[str]] = defaultdict(set)
    raw_triples = 0
    chunks_without = 0

    for ch in chunks:
        ex = extractions.get(ch.id) or Extraction()
        surfaces = list(ex.entities) + [x for t in ex.triples for x in (t[0], t[2])]
        ids = table.add_all(surfaces, chunk_id=ch.id, doc_id=ch.doc_id)
        if not ids:
            chunks_without += 1
            continue
        sents = [(sid, _padded(text)) for sid, text in ch.sentences]
        per_entity: dict[str, int] = {}
        for eid in ids:
            needle = f" {eid.removeprefix(ENTITY_ID_PREFIX)} "
            hits = [sid for sid, norm_text in sents if needle in norm_text]
            per_entity[eid] = max(1, len(hits))
            for sid in hits:
                sentence_mentions.append((sid, ch.doc_id, eid))
        for eid in ids:
            chunk_mentions.append((ch.id, ch.doc_id, eid, per_entity[eid]))
            mention_totals[eid] += per_entity[eid]
        triples = 0
        for s, r, o in ex.triples:
            sid_, oid_ = _table_id(table, s), _table_id(table, o)
            if sid_ is None or oid_ is None or sid_ == oid_:
                continue
            triples += 1
            rel_texts[(sid_, oid_)][" ".join(r.split())] += 1
            rel_docs[(sid_, oid_)].add(ch.doc_id)
        raw_triples += triples
        if co_occurrence == "always" or (co_occurrence == "auto" and triples == 0):
            top = sorted(ids, key=lambda e: (-per_entity[e], ids.index(e)))[:max_co_occurring]
            top.sort()
            for i, a in enumerate(top):
                for b in top[i + 1 :]:
                    co_counts[(a, b)] += 1
                    co_docs[(a, b)].add(ch.doc_id)

    def make_edges() -> Iterator[Edge]:
        for cid, did, eid, count in chunk_mentions:
            yield Edge(
                src=cid, dst=eid, type=EdgeType.MENTIONS, group=group, doc_id=did,
                props={"level": "chunk", "count": count},
            )
        for sid, did, eid in sentence_mentions:
            yield Edge(
                src=sid, dst=eid, type=EdgeType.MENTIONS, group=group, doc_id=did, props={"level": "sentence"}
            )
        for (s, o), texts in sorted(rel_texts.items()):
            yield Edge(
                src=s,
                dst=o,
                type=EdgeType.RELATION,
                group=group,
                doc_id=_owner(rel_docs[(s, o)]),
                props={
                    "relation": texts.most_common(1)[0][0],
                    "relations": sorted(texts),
                    "count": sum(texts.values()),
                    "docs": sorted(rel_docs[(s, o)]),
                },
            )
        for (a, b), n in sorted(co_counts.items()):
            yield Edge(
                src=a,
                dst=b,
                type=EdgeType.CO_OCCURS,
                group=group,
                doc_id=_owner(co_docs[(a, b)]),
                props={"count": n, "docs": sorted(co_docs[(a, b)])},
            )

    nodes = [
        Node(
            id=rec.id,
            label=Label.ENTITY,
            group=group,
            doc_id=None,
            props={
                "name": rec.name,
                "norm": rec.norm,
                "aliases": rec.aliases,
                "mention_count": mention_totals[rec.id],
                "chunk_count": len(rec.chunks),
                "doc_count": len(rec.docs),
            },
        )
        for rec in sorted(table, key=lambda r: r.norm)
    ]
    stats = {
        "chunks": len(chunks),
        "chunks_without_entities": chunks_without,
        "entities": len(nodes),
        "triples": raw_triples,
        "relation_edges": len(rel_texts),
        "co_occurs_edges": len(co_counts),
        "chunk_mentions": len(chunk_mentions),
        "sentence_mentions": len(sentence_mentions),
    }
    edge_count = len(chunk_mentions) + len(sentence_mentions) + len(rel_texts) + len(co_counts)
    return StreamedEntityLayer(nodes, stats, edge_count, make_edges)


def own_page_edges(group: str, chunks: Iterable[tuple[str, str, str | None]], entities: Container[str]) -> list[Edge]:
    """OWN_PAGE chunk -> entity for every chunk (id, document id, document title) whose title
    names an entity (:func:`~graphroute.core.lib.entities.own_page_entity`): the chunks of
    the entity's own page, which PPR's ``weight_title`` links to it beside its MENTIONS."""
    out = []
    for cid, doc_id, title in chunks:
        ent = own_page_entity(title, entities) if title else None
        if ent is not None:
            out.append(Edge(src=cid, dst=ent, type=EdgeType.OWN_PAGE, group=group, doc_id=doc_id or None))
    return out


def _table_id(table: EntityTable, surface: str) -> str | None:
    rec = table.get(normalize_name(surface))
    return rec.id if rec is not None else None


# cells (rows x entities) of one block of knn_pairs' similarity matrix: 4 Mi cells, ~64 MB
_KNN_BLOCK_CELLS = 1 << 22


def knn_pairs(
    ids: Sequence[str], matrix: np.ndarray, *, threshold: float, k: int, block: int = 1024
) -> list[tuple[str, str, float]]:
    """Mutual-or-not kNN edges: for each row its top-``k`` other rows with cosine >=
    ``threshold``; each undirected pair once (``a < b``), with the higher similarity.

    Blockwise so memory stays ``rows x n`` however many entities a corpus has: at most
    ``block`` rows, and fewer when ``n`` is large, so that a block's scores, their negation
    and argpartition's int64 order (16 bytes a cell) stay near 64 MB. A fixed 1,024 rows a
    block grows with the corpus: +501 MB above the step's entry on MuSiQue's entities.
    A row's neighbours come from its own scores; only the product's last float32 bits vary
    with the block's shape (MuSiQue's 18,445 entities: the same 38,525 edges, 281 of their
    similarities 1e-6 apart at six decimals). Rows are L2-normalised here, so any embedder
    works.
    """
    n = len(ids)
    if n < 2 or k <= 0:
        return []
    m = normalise_in_place(np.array(matrix, dtype=np.float32))
    kk = min(k, n - 1)
    rows_per_block = max(1, min(block, _KNN_BLOCK_CELLS // n))
    best: dict[tuple[int, int], float] = {}
    for start in range(0, n, rows_per_block):
        sims = m[start : start + rows_per_block] @ m.T
        rows = np.arange(sims.shape[0])
        sims[rows, rows + start] = -np.inf  # never a self edge
        part = np.argpartition(-sims, kk - 1, axis=1)[:, :kk]
        for r in range(sims.shape[0]):
            i = start + r
            for j in part[r]:
                s = float(sims[r, j])
                if s >= threshold:
                    key = (i, int(j)) if ids[i] < ids[int(j)] else (int(j), i)
                    if s > best.get(key, -1.0):
                        best[key] = s
    out = [(ids[a], ids[b], round(s, 6)) for (a, b), s in best.items()]
    out.sort()
    return out


def select_hubs(
    section_counts: Mapping[str, Mapping[str, float]],
    top_n: int,
    global_counts: Mapping[str, float],
) -> dict[str, list[str]]:
    """Per section, its ``top_n`` entities by mention count inside the section; ties go to
    the entity mentioned more in the whole group, then to the smaller id (deterministic)."""
    out: dict[str, list[str]] = {}
    for sec, counts in section_counts.items():
        ranked = sorted(counts, key=lambda e: (-counts[e], -global_counts.get(e, 0), e))
        if ranked:
            out[sec] = ranked[:top_n]
    return out


def shares_pairs(
    hubs: Mapping[str, Sequence[str]], section_doc: Mapping[str, str | None], *, max_sections: int
) -> tuple[list[tuple[str, str, list[str]]], int]:
    """Pairs of sections of *different* documents sharing a hub entity.

    Returns ``[(section_a, section_b, shared_entities)]`` with ``a < b`` and how many hub
    entities were skipped because they are hubs of more than ``max_sections`` sections:
    such an entity joins nearly everything (quadratically many edges) and so says little
    about any one pair.
    """
    by_entity: dict[str, list[str]] = defaultdict(list)
    for sec, ents in hubs.items():
        for e in ents:
            by_entity[e].append(sec)
    shared: dict[tuple[str, str], list[str]] = defaultdict(list)
    skipped = 0
    for e, secs in sorted(by_entity.items()):
        if len(secs) < 2:
            continue
        if len(secs) > max_sections:
            skipped += 1
            continue
        secs = sorted(secs)
        for i, a in enumerate(secs):
            for b in secs[i + 1 :]:
                if section_doc.get(a) != section_doc.get(b):
                    shared[(a, b)].append(e)
    return [(a, b, ents) for (a, b), ents in sorted(shared.items())], skipped


def detect_communities(
    nodes: Sequence[str],
    edges: Iterable[tuple[str, str, float]],
    *,
    algorithm: Literal["leiden", "louvain"] = "leiden",
    resolution: float = 1.0,
    seed: int = 42,
) -> dict[str, int]:
    """Partition ``nodes`` into communities of the weighted undirected graph ``edges``.

    Community numbers are ordered by size (largest first), ties by smallest member id, so
    they are stable across runs and backends. Isolated nodes are singleton communities.
    Leiden uses leidenalg (RB configuration model with ``resolution``; modularity at 1.0)
    with a fixed seed; Louvain uses igraph's multilevel algorithm with Python's RNG seeded.
    """
    import igraph as ig

    index = {n: i for i, n in enumerate(nodes)}
    weights: dict[tuple[int, int], float] = defaultdict(float)
    for a, b, w in edges:
        ia, ib = index.get(a), index.get(b)
        if ia is None or ib is None or ia == ib or w <= 0:
            continue
        weights[(min(ia, ib), max(ia, ib))] += float(w)
    g = ig.Graph(n=len(nodes), edges=list(weights), directed=False)
    g.es["weight"] = list(weights.values())
    if not len(nodes):
        return {}
    if algorithm == "leiden":
        import leidenalg as la

        part = la.find_partition(
            g,
            la.RBConfigurationVertexPartition,
            weights="weight",
            resolution_parameter=resolution,
            seed=seed,
        )
        membership = list(part.membership)
    else:
        import random

        state = random.getstate()
        random.seed(seed)
        try:
            membership = list(
                g.community_multilevel(weights="weight", resolution=resolution).membership
            )
        finally:
            random.setstate(state)
    members: dict[int, list[str]] = defaultdict(list)
    for n, c in zip(nodes, membership, strict=True):
        members[c].append(n)
    order = sorted(members.values(), key=lambda ms: (-len(ms), min(ms)))
    return {n: cid for cid, ms in enumerate(order) for n in ms}


PEERS_KEPT = 64  # members a Community node lists by links and by mentions (query stages read these)


def community_lists(
    members: Sequence[str], links: Mapping[str, int], entities: Mapping[str, Node], documents: int
) -> dict[str, Any]:
    """What the query stages read of a community instead of listing the group: its members
    with the most distinct neighbours (community_peers) and the most mentions
    (thematic_seeds), ``PEERS_KEPT`` of each, ties by id, and the documents they span."""

    def mentions(e: str) -> float:
        mc = entities[e].props.get("mention_count") if e in entities else None
        return float(mc) if isinstance(mc, int | float) else 0.0

    return {
        "peer_ids": sorted(members, key=lambda e: (-links.get(e, 0), e))[:PEERS_KEPT],
        "mentioned_ids": sorted(members, key=lambda e: (-mentions(e), e))[:PEERS_KEPT],
        "documents": documents,
    }


SIZE_BUCKETS: tuple[tuple[int, int | None], ...] = (
    (1, 1),
    (2, 2),
    (3, 5),
    (6, 10),
    (11, 20),
    (21, 50),
    (51, 100),
    (101, 500),
    (501, None),
)


def size_distribution(sizes: Sequence[int]) -> dict[str, Any]:
    """min / median / max and a bucketed histogram of community sizes."""
    if not sizes:
        return {"min": 0, "median": 0, "max": 0, "histogram": {}}
    hist: dict[str, int] = {}
    for lo, hi in SIZE_BUCKETS:
        label = f"{lo}" if lo == hi else (f"{lo}+" if hi is None else f"{lo}-{hi}")
        n = sum(1 for s in sizes if s >= lo and (hi is None or s <= hi))
        if n:
            hist[label] = n
    return {
        "min": min(sizes),
        "median": statistics.median(sizes),
        "max": max(sizes),
        "histogram": hist,
    }


def extractive_summary(
    top_names: Sequence[str], sentences: Sequence[tuple[str, str, float]]
) -> tuple[str, str, str | None]:
    """Offline community title and summary: the top entities by degree, then the most
    central sentence, i.e. the one mentioning the most (degree-weighted) members.

    ``sentences`` are ``(sentence id, text, centrality)``; returns (title, summary,
    sentence id used).
    """
    title = ", ".join(top_names[:3])
    summary = "Entities: " + ", ".join(top_names) + "."
    best = (
        max(sentences, key=lambda s: (s[2], -len(s[1]), s[0]), default=None) if sentences else None
    )
    if best is not None:
        summary += " " + best[1].strip()
        return title, summary, best[0]
    return title, summary, None


# =========================================================================== shared step helpers


def _step_meta(store: GraphStore, group: str, step: str) -> dict[str, Any]:
    value = store.get_meta(group, META_PREFIX + step)
    return value if isinstance(value, dict) else {}


def _config_key(*parts: Any) -> str:
    return content_hash(json.dumps(parts, sort_keys=True, default=str))


def _needs_rebuild(
    ctx: IndexContext, step: str, token: str, force: bool
) -> tuple[bool, dict[str, Any]]:
    """A derived layer is rebuilt when documents changed, when what it was built from
    (upstream build token + own parameters) changed, or when its last build did not finish."""
    meta = _step_meta(ctx.store, ctx.group, step)
    stale = force or ctx.dirty or meta.get("token") != token or not meta.get("complete")
    return stale, meta


def _finish(ctx: IndexContext, step: str, token: str, stats: dict[str, Any]) -> dict[str, Any]:
    ctx.store.set_meta(
        ctx.group, META_PREFIX + step, {"token": token, "complete": True, "stats": stats}
    )
    return stats


def _unchanged(meta: dict[str, Any]) -> dict[str, Any]:
    stats = dict(meta.get("stats") or {})
    stats["rebuilt"] = False
    return stats


EMBED_CALL_TEXTS = 4096  # texts per embedding call (see _embed)


def _write_edges(
    store: GraphStore, group: str, edges: Iterable[Edge], description: str, *, total: int | None = None
) -> None:
    """Edges in bounded transactions so one huge layer never holds the writer for long; an
    iterator is consumed one batch at a time (only a batch of Edge objects exists at once)."""
    if total is None and isinstance(edges, Sequence):
        total = len(edges)
    it = iter(edges)
    with progress.bar(description, total) as b:
        while batch := list(itertools.islice(it, EDGE_BATCH)):
            store.write(group, edges=batch)
            b.advance(len(batch))


def _embed(
    ctx: IndexContext, texts: Sequence[str], description: str, batch: int = EMBED_CALL_TEXTS
) -> np.ndarray:
    """Texts embedded in a few wide calls: the model sorts a call's texts by length before
    batching, so wider calls pad less (3,272 entity names: one call 9.1 s, 256-text calls
    10.5 s); the slices only bound memory and keep the progress bar moving."""
    dim = ctx.embedder.dimension
    if not texts:
        return np.zeros((0, dim), dtype=np.float32)
    parts: list[np.ndarray] = []
    with progress.bar(description, len(texts)) as b:
        for i in range(0, len(texts), batch):
            chunk = list(texts[i : i + batch])
            parts.append(np.asarray(ctx.embedder.embed(chunk), dtype=np.float32))
            b.advance(len(chunk))
    return np.vstack(parts)


def _entity_graph_token(ctx: IndexContext) -> str:
    return str(_step_meta(ctx.store, ctx.group, "entity_graph").get("token", ""))


# =========================================================================== entity_graph


class ExtractionCache:
    """Per-extractor JSON-lines cache of extractions keyed by chunk content hash, so a
    rebuild after one changed document re-extracts only that document's chunks."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self.data: dict[str, Extraction] = {}
        if path.is_file():
            for line in path.read_text(encoding="utf-8").splitlines():
                try:
                    row = json.loads(line)
                    self.data[row["k"]] = Extraction(
                        entities=list(row["e"]), triples=[(t[0], t[1], t[2]) for t in row["t"]]
                    )
                except (ValueError, KeyError, TypeError, IndexError):
                    continue  # a torn last line after a crash

    def put_many(self, rows: Mapping[str, Extraction]) -> None:
        if not rows:
            return
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("a", encoding="utf-8") as f:
                for k, ex in rows.items():
                    f.write(
                        json.dumps({"k": k, "e": ex.entities, "t": [list(t) for t in ex.triples]})
                        + "\n"
                    )
            self.data.update(rows)


def chunk_title(chunk: Node, titles: Mapping[str, str]) -> str | None:
    """A chunk's document title (:func:`~graphroute.core.api.store.document_titles`), else the title it carries."""
    return titles.get(chunk.doc_id or "") or str(chunk.props.get("title") or "") or None


def load_chunks(store: GraphStore, group: str) -> list[ChunkInput]:
    """The group's TextChunks with their sentences (reading order) and document titles."""
    titles = document_titles(store, group)
    chunks = {
        n.id: ChunkInput(
            id=n.id, doc_id=n.doc_id or "", text=str(n.props.get("text") or ""), title=chunk_title(n, titles)
        )
        for n in store.iter_nodes(group, Label.CHUNK)
    }
    rows: list[tuple[str, int, str, str]] = []
    orphans: list[tuple[int, str, str]] = []  # sentences without a chunk_id property
    for s in store.iter_nodes(group, Label.SENTENCE):
        order = s.props.get("position", s.props.get("chunk_char_offset", 0))
        pos = int(order) if isinstance(order, int | float) else 0
        text = str(s.props.get("text") or "")
        cid = str(s.props.get("chunk_id") or "")
        if cid in chunks:
            rows.append((cid, pos, s.id, text))
        elif not cid:
            orphans.append((pos, s.id, text))
    if orphans:  # only then pay for a scan of PART_OF edges (sentence -> chunk)
        sentence_chunk = {
            e.src: e.dst for e in store.iter_edges(group, [EdgeType.PART_OF]) if e.dst in chunks
        }
        rows += [
            (sentence_chunk[sid], pos, sid, t) for pos, sid, t in orphans if sid in sentence_chunk
        ]
    for cid, _, sid, text in sorted(rows):
        chunks[cid].sentences.append((sid, text))
    return [chunks[k] for k in sorted(chunks)]


def make_extractor(ctx: IndexContext, name: str, params: Mapping[str, Any]) -> Extractor:
    cls = ctx.registry.extractors.get(name)
    ex = cls(cls.Params(**dict(params)))
    bind = getattr(ex, "bind", None)
    if callable(bind):
        bind(llm=ctx.llm() if name == "llm_openie" else None, cache_dir=ctx.settings.cache_dir)
    return ex


class EntityGraphStep(IndexStep):
    """Entities, MENTIONS, RELATION / CO_OCCURS edges and entity-name vectors from chunks."""

    name = "entity_graph"
    layer_version = 2  # 2: OWN_PAGE edges

    class Params(ComponentParams):
        extractor: str = Field(
            "spacy", description="registered extractor: spacy | replay | llm_openie | a plugin's"
        )
        extractor_params: dict[str, Any] = Field(
            default_factory=dict, description="the extractor's own Params"
        )
        co_occurrence: Literal["auto", "always", "never"] = Field(
            "auto",
            description="CO_OCCURS edges: for chunks without triples (auto), always, or never",
        )
        max_co_occurring: int = Field(
            30, ge=2, le=500, description="entities per chunk that get CO_OCCURS pairs"
        )
        min_chars: int = Field(
            2, ge=1, le=20, description="normalised names shorter than this are dropped"
        )
        batch_size: int = Field(256, ge=1, le=100_000, description="chunks per extractor call")
        cache: bool = Field(
            True, description="cache extractions per chunk content hash under settings.cache_dir"
        )

    params: Params

    # extractors whose output depends on a file or a service that may change under the
    # same params are not cached at this level (replay reads its file afresh)
    UNCACHED = frozenset({"replay"})

    def run(self, ctx: IndexContext) -> dict[str, Any]:
        p = self.params
        token = _config_key("entity_graph", p.model_dump())
        meta = _step_meta(ctx.store, ctx.group, self.name)
        if not ctx.dirty and meta.get("config") == token and meta.get("complete"):
            return _unchanged(meta)
        t0 = time.perf_counter()
        store, group = ctx.store, ctx.group
        enter_phase("step:entity_graph:load_chunks")
        chunks = load_chunks(store, group)
        enter_phase("step:entity_graph:extract")
        extractor = make_extractor(ctx, p.extractor, p.extractor_params)
        extractions, ex_stats = self._extract(ctx, extractor, chunks)
        enter_phase("step:entity_graph:layer")
        layer = stream_entity_layer(
            group,
            chunks,
            extractions,
            co_occurrence=p.co_occurrence,
            max_co_occurring=p.max_co_occurring,
            min_chars=p.min_chars,
        )
        pages = own_page_edges(group, ((c.id, c.doc_id, c.title) for c in chunks), {n.id for n in layer.entities})
        # The layer keeps only its aggregates; the chunks' texts and every extraction are
        # done with. Let them go before the entity vectors and the edge writes, where the
        # index peaks at 100k sentences.
        del chunks, extractions
        release_free_memory()
        enter_phase("step:entity_graph:vectors")
        old_vectors = self._old_vectors(store, group)
        store.set_meta(group, META_PREFIX + self.name, {"config": token, "complete": False})
        store.delete_derived(
            group,
            labels=[Label.ENTITY],
            edge_types=[EdgeType.MENTIONS, EdgeType.RELATION, EdgeType.CO_OCCURS, EdgeType.OWN_PAGE],
        )
        names = [str(n.props["name"]) for n in layer.entities]
        vecs = self._vectors(ctx, names, old_vectors)
        ids = [n.id for n in layer.entities]
        store.write(
            group, nodes=layer.entities, vectors={VectorSpace.ENTITY: (ids, vecs)} if ids else None
        )
        enter_phase("step:entity_graph:write_edges")
        _write_edges(store, group, layer.iter_edges(), "entity edges", total=layer.edge_count)
        _write_edges(store, group, pages, "own-page edges")
        store.set_meta(group, OWN_PAGES_META, {"edges": len(pages)})
        stats = {
            **layer.stats,
            "own_page_edges": len(pages),
            "extractor": p.extractor,
            "extraction": dict(sorted(ex_stats.items())),
            "rebuilt": True,
            "seconds": round(time.perf_counter() - t0, 2),
        }
        build = _config_key(token, layer.stats, store.version(group))
        store.set_meta(
            group,
            META_PREFIX + self.name,
            {"token": build, "complete": True, "config": token, "stats": stats},
        )
        return stats  # downstream steps compare against `token` (this build), not `config`

    def _extract(
        self, ctx: IndexContext, extractor: Extractor, chunks: Sequence[ChunkInput]
    ) -> tuple[dict[str, Extraction], Counter[str]]:
        p = self.params
        cache: ExtractionCache | None = None
        if p.cache and p.extractor not in self.UNCACHED:
            version = str(getattr(extractor, "cache_version", ""))
            key = _config_key(p.extractor, p.extractor_params, version)[:16]
            cache = ExtractionCache(
                Path(ctx.settings.cache_dir) / "extractions" / f"{p.extractor}-{key}.jsonl"
            )
        out: dict[str, Extraction] = {}
        todo: list[ChunkInput] = []
        stats: Counter[str] = Counter()
        for ch in chunks:
            k = content_hash(f"{ch.title or ''}\x00{ch.text}")
            hit = cache.data.get(k) if cache is not None else None
            if hit is not None:
                out[ch.id] = hit
                stats["cached_chunks"] += 1
            else:
                todo.append(ch)
        with progress.bar(f"extract entities ({p.extractor})", len(todo)) as b:
            for i in range(0, len(todo), p.batch_size):
                batch = todo[i : i + p.batch_size]
                res = extractor.extract(
                    [c.text for c in batch], titles=[c.title or "" for c in batch]
                )
                fresh: dict[str, Extraction] = {}
                for ch, ex in zip(batch, res, strict=True):
                    out[ch.id] = ex
                    fresh[content_hash(f"{ch.title or ''}\x00{ch.text}")] = ex
                if cache is not None:
                    cache.put_many(fresh)
                release_free_memory()  # the extractor's per-batch garbage (spaCy, see there)
                b.advance(len(batch))
        stats["extracted_chunks"] = len(todo)
        stats.update(getattr(extractor, "stats", {}) or {})
        return out, stats

    @staticmethod
    def _old_vectors(store: GraphStore, group: str) -> dict[str, np.ndarray]:
        """Name -> vector of the entities about to be rebuilt: unchanged names are not
        embedded again."""
        ids, mat = store.all_vectors(group, VectorSpace.ENTITY)
        if not ids:
            return {}
        names = {n.id: str(n.props.get("name", "")) for n in store.get_nodes(group, ids)}
        return {names[i]: mat[r] for r, i in enumerate(ids) if i in names}

    @staticmethod
    def _vectors(
        ctx: IndexContext, names: Sequence[str], old: Mapping[str, np.ndarray]
    ) -> np.ndarray:
        dim = ctx.embedder.dimension
        out = np.zeros((len(names), dim), dtype=np.float32)
        missing: list[int] = []
        for i, n in enumerate(names):
            v = old.get(n)
            if v is not None and v.shape == (dim,):
                out[i] = v
            else:
                missing.append(i)
        if missing:
            fresh = _embed(ctx, [names[i] for i in missing], "embed entity names")
            out[missing] = fresh
        return out


# =========================================================================== entity_knn


class EntityKnnStep(IndexStep):
    """SEMANTICALLY_SIMILAR entity <-> entity edges from entity-name vectors (PPR path 3)."""

    name = "entity_knn"

    class Params(ComponentParams):
        threshold: float = Field(
            0.60, ge=-1.0, le=1.0, description="minimum cosine similarity of an edge"
        )
        k: int = Field(5, ge=1, le=100, description="neighbours kept per entity")
        block: int = Field(
            1024,
            ge=16,
            le=65_536,
            description="most rows per blockwise similarity product (fewer when entities are many)",
        )

    params: Params

    def run(self, ctx: IndexContext) -> dict[str, Any]:
        p = self.params
        token = _config_key(self.name, p.model_dump(), _entity_graph_token(ctx))
        stale, meta = _needs_rebuild(ctx, self.name, token, force=False)
        if not stale:
            return _unchanged(meta)
        t0 = time.perf_counter()
        store, group = ctx.store, ctx.group
        ids, mat = store.all_vectors(group, VectorSpace.ENTITY)
        ent_ids = (
            {n.id for n in store.get_nodes(group, ids) if n.label == Label.ENTITY} if ids else set()
        )
        keep = [i for i, x in enumerate(ids) if x in ent_ids]
        ids = [ids[i] for i in keep]
        mat = mat[keep] if len(keep) else mat
        with progress.bar("entity kNN", 1) as b:
            pairs = knn_pairs(ids, mat, threshold=p.threshold, k=p.k, block=p.block)
            b.advance()
        store.delete_derived(
            group, edge_types=[EdgeType.SEMANTICALLY_SIMILAR], edge_src_label=Label.ENTITY
        )
        edges = [
            Edge(
                src=a,
                dst=b,
                type=EdgeType.SEMANTICALLY_SIMILAR,
                group=group,
                props={"similarity": s, "kind": "entity"},
            )
            for a, b, s in pairs
        ]
        _write_edges(store, group, edges, "entity kNN edges")
        sims = [s for _, _, s in pairs]
        stats = {
            "entities": len(ids),
            "knn_edges": len(edges),
            "threshold": p.threshold,
            "k": p.k,
            "mean_similarity": round(float(np.mean(sims)), 4) if sims else None,
            "rebuilt": True,
            "seconds": round(time.perf_counter() - t0, 2),
        }
        return _finish(ctx, self.name, token, stats)


# =========================================================================== hub_entities


class HubEntitiesStep(IndexStep):
    """HAS_HUB_ENTITY section -> top entities, SHARES_ENTITY across documents (PPR paths 4-5)."""

    name = "hub_entities"

    class Params(ComponentParams):
        top_n: int = Field(
            3, ge=1, le=50, description="hub entities per section (by mentions in the section)"
        )
        max_sections_per_entity: int = Field(
            50,
            ge=2,
            le=100_000,
            description="an entity that is a hub of more sections links no SHARES_ENTITY pairs (too generic)",
        )

    params: Params

    def run(self, ctx: IndexContext) -> dict[str, Any]:
        p = self.params
        token = _config_key(self.name, p.model_dump(), _entity_graph_token(ctx))
        stale, meta = _needs_rebuild(ctx, self.name, token, force=False)
        if not stale:
            return _unchanged(meta)
        t0 = time.perf_counter()
        store, group = ctx.store, ctx.group
        sections = {n.id: n for n in store.iter_nodes(group, Label.SECTION)}
        chunk_section: dict[str, str] = {}
        for e in store.iter_edges(group, [EdgeType.IN_SECTION]):
            if e.dst in sections:
                chunk_section[e.src] = e.dst
        section_counts: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
        global_counts: dict[str, float] = defaultdict(float)
        for e in store.iter_edges(group, [EdgeType.MENTIONS]):
            if e.props.get("level") != "chunk":
                continue
            n = float(e.props.get("count", 1) or 1)
            global_counts[e.dst] += n
            sec = chunk_section.get(e.src)
            if sec is not None:
                section_counts[sec][e.dst] += n
        hubs = select_hubs(section_counts, p.top_n, global_counts)
        section_doc = {sid: n.doc_id for sid, n in sections.items()}
        pairs, skipped = shares_pairs(hubs, section_doc, max_sections=p.max_sections_per_entity)
        store.delete_derived(group, edge_types=[EdgeType.HAS_HUB_ENTITY, EdgeType.SHARES_ENTITY])
        edges: list[Edge] = []
        for sec, ents in sorted(hubs.items()):
            for rank, ent in enumerate(ents):
                edges.append(
                    Edge(
                        src=sec,
                        dst=ent,
                        type=EdgeType.HAS_HUB_ENTITY,
                        group=group,
                        doc_id=section_doc.get(sec),
                        props={"rank": rank + 1, "mentions": section_counts[sec][ent]},
                    )
                )
        for a, b, ents in pairs:
            edges.append(
                Edge(
                    src=a,
                    dst=b,
                    type=EdgeType.SHARES_ENTITY,
                    group=group,
                    props={"entity": ents[0], "entities": ents, "count": len(ents)},
                )
            )
        _write_edges(store, group, edges, "hub / shares edges")
        stats = {
            "sections": len(sections),
            "sections_with_hubs": len(hubs),
            "hub_edges": sum(len(v) for v in hubs.values()),
            "hub_entities": len({e for v in hubs.values() for e in v}),
            "shares_edges": len(pairs),
            "entities_too_generic_to_share": skipped,
            "rebuilt": True,
            "seconds": round(time.perf_counter() - t0, 2),
        }
        return _finish(ctx, self.name, token, stats)


# =========================================================================== communities

SUMMARY_SYSTEM = (
    "You summarise one community of a knowledge graph for a search index. Return only a JSON "
    'object {"title": "...", "summary": "..."}: a title of at most 8 words and a summary of at '
    "most 3 sentences saying what connects the entities. Use only the facts given."
)


class CommunitySummary(BaseModel):
    """The JSON a community summary answer must parse into."""

    title: str = ""
    summary: str


class CommunitiesStep(IndexStep):
    """Leiden/Louvain communities of entities, with summaries, embeddings and BELONGS_TO."""

    name = "communities"

    class Params(ComponentParams):
        algorithm: Literal["leiden", "louvain"] = Field(
            "leiden", description="community detection algorithm"
        )
        resolution: float = Field(
            1.0, gt=0.0, le=100.0, description="higher -> more, smaller communities"
        )
        seed: int = Field(42, description="random seed, fixed for deterministic partitions")
        min_size: int = Field(
            2, ge=1, le=1000, description="smaller communities get no Community node"
        )
        relation_weight: float = Field(
            1.0, ge=0.0, description="weight of a RELATION edge (x its triple count)"
        )
        co_occurs_weight: float = Field(
            1.0, ge=0.0, description="weight of a CO_OCCURS edge (x its chunk count)"
        )
        similar_weight: float = Field(
            1.0, ge=0.0, description="weight of an entity SEMANTICALLY_SIMILAR edge (x similarity)"
        )
        top_entities: int = Field(
            8, ge=1, le=50, description="entities named in a community's summary"
        )
        summarizer: Literal["auto", "extractive", "llm"] = Field(
            "auto", description="auto: LLM when one is configured, extractive offline"
        )

    params: Params

    def run(self, ctx: IndexContext) -> dict[str, Any]:
        p = self.params
        knn_token = str(_step_meta(ctx.store, ctx.group, "entity_knn").get("token", ""))
        token = _config_key(self.name, p.model_dump(), _entity_graph_token(ctx), knn_token)
        stale, meta = _needs_rebuild(ctx, self.name, token, force=False)
        if not stale:
            return _unchanged(meta)
        t0 = time.perf_counter()
        store, group = ctx.store, ctx.group
        enter_phase("step:communities:load")
        entities = {n.id: n for n in store.iter_nodes(group, Label.ENTITY)}
        ids = sorted(entities)
        edges, degree, relations, links = self._entity_edges(store, group, entities)
        enter_phase("step:communities:detect")
        t_detect = time.perf_counter()
        # the seam for an in-database implementation (GraphStore.detect_communities); the
        # client detects them on the entity layer it just read when the store has none
        found = store.detect_communities(
            group, Label.ENTITY, self._edge_weights(), algorithm=p.algorithm, resolution=p.resolution, seed=p.seed
        )
        detected_by = "store" if found is not None else "client"
        membership = found if found is not None else detect_communities(
            ids, edges, algorithm=p.algorithm, resolution=p.resolution, seed=p.seed
        )
        detect_s = time.perf_counter() - t_detect
        enter_phase("step:communities:write")
        members: dict[int, list[str]] = defaultdict(list)
        for eid, c in membership.items():
            members[c].append(eid)
        kept = {c: ms for c, ms in members.items() if len(ms) >= p.min_size}
        llm = ctx.llm() if p.summarizer in ("auto", "llm") else None
        if p.summarizer == "llm" and llm is None:
            raise RuntimeError(
                "communities: summarizer 'llm' needs an LLM client (set GRAPHROUTE_LLM)"
            )
        # sentences are read for the entities a summary names (the top ones of each community)
        summary_entities = {
            e for ms in kept.values() for e in sorted(ms, key=lambda e: (-degree.get(e, 0.0), e))[: p.top_entities]
        }
        sentence_mentions = self._sentence_mentions(store, group, summary_entities)
        docs_of = self._documents(store, group, kept)
        store.delete_derived(group, labels=[Label.COMMUNITY], edge_types=[EdgeType.BELONGS_TO])
        for eid, n in entities.items():
            n.props["community"] = membership.get(eid)
            n.props["degree"] = round(degree.get(eid, 0.0), 4)
            n.props["links"] = links.get(eid, 0)
        comm_nodes: list[Node] = []
        belongs: list[Edge] = []
        llm_failures = 0
        self._usage = LLMResponse(text="", calls=0)  # what the summaries' model calls cost
        for c, ms in progress.track(sorted(kept.items()), "community summaries"):
            ranked = sorted(ms, key=lambda e: (-degree.get(e, 0.0), e))
            top = ranked[: p.top_entities]
            top_names = [str(entities[e].props.get("name", e)) for e in top]
            title, summary, source = "", "", "extractive"
            if llm is not None:
                got = self._llm_summary(
                    llm, top_names, relations, set(ms), entities, sentence_mentions, store, group
                )
                if got is not None:
                    title, summary = got
                    source = "llm"
                else:
                    llm_failures += 1
            if not summary:
                cands = self._central_sentences(set(top), degree, sentence_mentions)
                texts = {
                    n.id: str(n.props.get("text", ""))
                    for n in store.get_nodes(group, [s for s, _ in cands])
                }
                title, summary, _ = extractive_summary(
                    top_names, [(s, texts.get(s, ""), w) for s, w in cands if texts.get(s)]
                )
            comm_nodes.append(
                Node(
                    id=f"{COMMUNITY_ID_PREFIX}{c}",
                    label=Label.COMMUNITY,
                    group=group,
                    props={
                        "community": c,
                        "size": len(ms),
                        "title": title,
                        "summary": summary,
                        "top_entities": top_names,
                        "top_entity_ids": top,
                        "summary_source": source,
                        **community_lists(ms, links, entities, docs_of.get(c, 0)),
                    },
                )
            )
            belongs.extend(
                Edge(src=e, dst=f"{COMMUNITY_ID_PREFIX}{c}", type=EdgeType.BELONGS_TO, group=group)
                for e in ms
            )
        summary_texts = [f"{n.props['title']}. {n.props['summary']}" for n in comm_nodes]
        vecs = _embed(ctx, summary_texts, "embed community summaries")
        store.write(
            group,
            nodes=[*entities.values(), *comm_nodes],
            vectors={VectorSpace.COMMUNITY: ([n.id for n in comm_nodes], vecs)}
            if comm_nodes
            else None,
        )
        _write_edges(store, group, belongs, "BELONGS_TO edges")
        sizes = [len(ms) for ms in members.values()]
        kept_sizes = [len(ms) for ms in kept.values()]
        stats = {
            "algorithm": p.algorithm,
            "entities": len(ids),
            "graph_edges": len(edges),
            "communities": len(kept),
            "singletons": sum(1 for s in sizes if s == 1),
            "partition_size": len(members),
            "size_distribution": size_distribution(kept_sizes),
            "entities_in_communities": sum(kept_sizes),
            "summaries": {
                "llm": sum(1 for n in comm_nodes if n.props["summary_source"] == "llm"),
                "extractive": sum(
                    1 for n in comm_nodes if n.props["summary_source"] == "extractive"
                ),
                "llm_failures": llm_failures,
                "llm_prompt_tokens": self._usage.prompt_tokens,
                "llm_completion_tokens": self._usage.completion_tokens,
                "llm_cost_usd": round(self._usage.cost_usd, 6),
            },
            "detected_by": detected_by,
            "detect_seconds": round(detect_s, 2),
            "rebuilt": True,
            "seconds": round(time.perf_counter() - t0, 2),
        }
        return _finish(ctx, self.name, token, stats)

    def _edge_weights(self) -> dict[str, float]:
        p = self.params
        return {
            EdgeType.RELATION.value: p.relation_weight,
            EdgeType.CO_OCCURS.value: p.co_occurs_weight,
            EdgeType.SEMANTICALLY_SIMILAR.value: p.similar_weight,
        }

    def _entity_edges(
        self, store: GraphStore, group: str, entities: Mapping[str, Node]
    ) -> tuple[list[tuple[str, str, float]], dict[str, float], dict[tuple[str, str], str], dict[str, int]]:
        """Weighted entity-entity edges, weighted degrees, relation texts, and each entity's
        number of distinct neighbours over these edges whatever their weight (``links``:
        what community_peers ranks members by)."""
        p = self.params
        out: list[tuple[str, str, float]] = []
        degree: dict[str, float] = defaultdict(float)
        relations: dict[tuple[str, str], str] = {}
        position = {e: i for i, e in enumerate(entities)}
        n = len(position)
        pairs = array("q")  # a * n + b for each linked pair (a < b): 8 bytes an edge
        types = [EdgeType.RELATION, EdgeType.CO_OCCURS, EdgeType.SEMANTICALLY_SIMILAR]
        for e in store.iter_edges(group, types):
            if e.src not in entities or e.dst not in entities or e.src == e.dst:
                continue
            a, b = position[e.src], position[e.dst]
            pairs.append(min(a, b) * n + max(a, b))
            if e.type == EdgeType.RELATION:
                w = p.relation_weight * float(e.props.get("count", 1) or 1)
                relations[(e.src, e.dst)] = str(e.props.get("relation", ""))
            elif e.type == EdgeType.CO_OCCURS:
                w = p.co_occurs_weight * float(e.props.get("count", 1) or 1)
            else:
                w = p.similar_weight * float(e.props.get("similarity", 1.0) or 0.0)
            if w <= 0 or not math.isfinite(w):
                continue
            out.append((e.src, e.dst, w))
            degree[e.src] += w
            degree[e.dst] += w
        linked = np.unique(np.frombuffer(pairs, dtype=np.int64)) if len(pairs) else np.zeros(0, dtype=np.int64)
        counts = np.bincount(np.concatenate([linked // max(n, 1), linked % max(n, 1)]), minlength=n)
        names = list(position)
        return out, degree, relations, {names[i]: int(counts[i]) for i in np.flatnonzero(counts)}

    @staticmethod
    def _documents(store: GraphStore, group: str, communities: Mapping[int, Sequence[str]]) -> dict[int, int]:
        """community -> how many documents its members are mentioned in (their chunks'
        documents), read a community at a time."""
        out: dict[int, int] = {}
        for c, members in communities.items():
            docs: set[str] = set()
            for part in batched(members, 2_000):
                nb = store.neighbours(group, part, [EdgeType.MENTIONS], other_labels=[Label.CHUNK])
                docs.update(d for d in nb.other_doc if d)
            out[c] = len(docs)
        return out

    @staticmethod
    def _sentence_mentions(store: GraphStore, group: str, wanted: set[str]) -> dict[str, list[str]]:
        """entity id -> ids of the sentences mentioning it, read for ``wanted`` alone."""
        out: dict[str, list[str]] = defaultdict(list)
        for part in batched(sorted(wanted), 500):
            nb = store.neighbours(group, part, [EdgeType.MENTIONS], other_labels=[Label.SENTENCE])
            for e, sent in zip(nb.node, nb.other, strict=True):
                out[e].append(sent)
        return out

    @staticmethod
    def _central_sentences(
        top: set[str],
        degree: Mapping[str, float],
        sentence_mentions: Mapping[str, list[str]],
        limit: int = 5,
    ) -> list[tuple[str, float]]:
        """Sentences scored by the summed degree of the top entities they mention."""
        score: dict[str, float] = defaultdict(float)
        for e in top:
            for s in sentence_mentions.get(e, []):
                score[s] += 1.0 + degree.get(e, 0.0)
        return sorted(score.items(), key=lambda kv: (-kv[1], kv[0]))[:limit]

    def _llm_summary(
        self,
        llm: LLMClient,
        top_names: Sequence[str],
        relations: Mapping[tuple[str, str], str],
        members: set[str],
        entities: Mapping[str, Node],
        sentence_mentions: Mapping[str, list[str]],
        store: GraphStore,
        group: str,
    ) -> tuple[str, str] | None:
        facts = [
            f"{entities[s].props.get('name', s)} -- {r} --> {entities[o].props.get('name', o)}"
            for (s, o), r in relations.items()
            if s in members and o in members
        ][:25]
        name_to_id = {str(entities[e].props.get("name")): e for e in members}
        top_ids = {name_to_id[n] for n in top_names if n in name_to_id}
        sent_ids = [s for s, _ in self._central_sentences(top_ids, {}, sentence_mentions, limit=5)]
        sents = [str(n.props.get("text", "")) for n in store.get_nodes(group, sent_ids)]
        user = (
            "Entities: "
            + ", ".join(top_names)
            + "\n\nFacts:\n"
            + ("\n".join(facts) or "(none)")
            + "\n\nSentences:\n"
            + ("\n".join(f"- {s}" for s in sents) or "(none)")
        )
        from graphroute.core.errors import LLMOutputError
        from graphroute.core.lib.llm import add_usage, complete_json

        messages = [
            {"role": "system", "content": SUMMARY_SYSTEM},
            {"role": "user", "content": user},
        ]
        try:
            out, resp = complete_json(
                llm, messages, CommunitySummary, max_tokens=300, repair_attempts=1
            )
            add_usage(self._usage, resp)
        except Exception as exc:  # invalid after a repair round, or the request failed
            if isinstance(exc, LLMOutputError):
                add_usage(self._usage, exc.usage)
            log.warning("communities: LLM summary failed, using extractive: %s", exc)
            return None
        title, summary = out.title.strip(), out.summary.strip()
        return (title or ", ".join(top_names[:3]), summary) if summary else None


@hookimpl
def register_index_steps() -> list[type[IndexStep]]:
    return [EntityGraphStep, EntityKnnStep, HubEntitiesStep, CommunitiesStep]
