"""A generated index at scale, written straight into a store: ``graphroute perf graph-gen``.

Indexing a million sentences for real would take hours of embedding and spaCy on two cores,
so this writes what the indexer would write - without running a model:

* **documents** of 4-9 sentences, each on one of ``topics`` topics, built by the indexer's own
  skeleton code (Document, Section, Paragraph, Sentence and TextChunk nodes and their edges;
  the generator knows every sentence boundary, so no parser runs);
* **entities**: a vocabulary of ``entities`` generated names spread over the topics. Each
  sentence names 1-4 of its topic's entities, drawn by a Zipf law (a few per topic are
  mentioned thousands of times), and with probability ``hub_share`` one of ``hubs`` names
  shared by every topic (hubs across the corpus, as "United States" is in an encyclopaedia).
  The entity layer is what the entity_graph step builds from such mentions: Entity nodes
  (name, norm, aliases, mention, chunk and document counts), MENTIONS from chunks and
  sentences, CO_OCCURS between the (at most 30) most mentioned entities of a chunk;
* **the other layers**: ``knn`` SEMANTICALLY_SIMILAR edges per entity and per section to
  others of the same topic, HAS_HUB_ENTITY from each section to its three most mentioned
  entities, SHARES_ENTITY between sections of different documents with the same hub, and
  one community per topic (plus one for the shared hubs) with the lists the communities
  step writes on a Community node and BELONGS_TO edges;
* **vectors**: random unit vectors of ``dim`` dimensions around a centre per topic, for
  sentences, chunks, entities and communities (what the query routes search). They carry no
  meaning: a question's embedding finds arbitrary neighbours; the cost is what is measured.

Everything is deterministic for a ``GraphSpec``. Questions name two entities of one sentence
(:func:`questions`), so seed resolution finds real nodes.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from graphroute.core.api.models import Edge, EdgeType, Label, Node, VectorSpace
from graphroute.core.lib.entities import (
    ENTITY_ID_PREFIX,
    OWN_PAGES_META,
    normalize_name,
    own_page_entity,
)

_SYLLABLES = ("ka", "lo", "ven", "dra", "mi", "tor", "sel", "qua", "ri", "bes", "nal", "or", "phi", "gan",
              "ust", "el", "zo", "mar", "thi", "cun", "ard", "wy", "lis", "pen", "bru", "sta", "gor", "ime")
_NOUNS = ("survey", "archive", "expedition", "workshop", "charter", "festival", "treaty", "catalogue",
          "foundry", "observatory", "academy", "harbour", "ledger", "bridge", "chronicle", "garden")
_VERBS = ("founded", "visited", "funded", "described", "rebuilt", "studied", "mapped", "praised",
          "criticised", "inherited", "restored", "documented")
_ADJS = ("remarkable", "modest", "contested", "influential", "short-lived", "celebrated", "northern", "early")
COMMUNITY_ID_PREFIX = "comm:"  # as the communities step names its nodes
CO_OCCURRING_MAX = 30  # the entity_graph step's max_co_occurring default
LISTED = 64  # members a Community node lists (the communities step's PEERS_KEPT)


@dataclass(frozen=True)
class GraphSpec:
    """What :func:`write_graph` generates (defaults: the scale figures' 1M sentences)."""

    sentences: int = 1_000_000
    topics: int = 400
    entities: int = 300_000
    hubs: int = 50
    hub_share: float = 0.05  # chance a sentence also names one of the shared hubs
    zipf: float = 1.0  # exponent of an entity's popularity within its topic
    knn: int = 2  # SEMANTICALLY_SIMILAR edges per entity and per section
    dim: int = 384
    seed: int = 7


@dataclass(frozen=True)
class GenPassage:
    index: int
    topic: int
    title: str
    sentences: tuple[str, ...]
    mentions: tuple[tuple[int, ...], ...]  # entity numbers each sentence names


class Vocabulary:
    """Entity names (unique norms), their topics and their popularity."""

    def __init__(self, spec: GraphSpec) -> None:
        rng = random.Random(f"{spec.seed}:names")
        names: list[str] = []
        seen: set[str] = set()
        while len(names) < spec.entities + spec.hubs:
            name = " ".join(
                "".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(2, 3))).capitalize() for _ in range(rng.randint(1, 3))
            )
            norm = normalize_name(name)
            if norm not in seen:
                seen.add(norm)
                names.append(name)
        self.names = names
        self.hub_ids = np.arange(spec.entities, spec.entities + spec.hubs)
        # entity n < entities belongs to topic n % topics, its rank there n // topics
        self.per_topic = [np.arange(t, spec.entities, spec.topics) for t in range(spec.topics)]
        ranks = np.arange(1, max(len(m) for m in self.per_topic) + 1, dtype=np.float64)
        weights = ranks ** -spec.zipf
        self.topic_cdf = [np.cumsum(weights[: len(m)]) / weights[: len(m)].sum() for m in self.per_topic]
        hub_w = np.arange(1, spec.hubs + 1, dtype=np.float64) ** -spec.zipf
        self.hub_cdf = np.cumsum(hub_w) / hub_w.sum()

    def topic_of(self, e: int, spec: GraphSpec) -> int:
        """An entity's community: its topic, or ``topics`` for the shared hubs."""
        return e % spec.topics if e < spec.entities else spec.topics

    def entity_id(self, e: int) -> str:
        return ENTITY_ID_PREFIX + normalize_name(self.names[e])


def passages(spec: GraphSpec, vocab: Vocabulary) -> Iterator[GenPassage]:
    """The corpus, passage by passage, exactly ``spec.sentences`` sentences."""
    left, i = spec.sentences, 0
    while left > 0:
        rng = np.random.default_rng([spec.seed, i])
        topic = int(rng.integers(spec.topics))
        n = min(left, int(rng.integers(4, 10)))
        members, cdf = vocab.per_topic[topic], vocab.topic_cdf[topic]
        sents: list[str] = []
        mentions: list[tuple[int, ...]] = []
        for _ in range(n):
            k = int(rng.integers(1, 4))
            chosen = list(dict.fromkeys(int(members[j]) for j in np.searchsorted(cdf, rng.random(k))))
            if rng.random() < spec.hub_share:
                chosen.append(int(vocab.hub_ids[int(np.searchsorted(vocab.hub_cdf, rng.random()))]))
            names = [vocab.names[e] for e in chosen]
            named = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
            verb, adj, noun = (_VERBS[int(rng.integers(len(_VERBS)))], _ADJS[int(rng.integers(len(_ADJS)))],
                               _NOUNS[int(rng.integers(len(_NOUNS)))])
            sents.append(f"In {int(rng.integers(1600, 2000))}, {named} {verb} the {adj} {noun} number {int(rng.integers(1, 10**6))}.")
            mentions.append(tuple(chosen))
        yield GenPassage(i, topic, f"Topic {topic} record {i}", tuple(sents), tuple(mentions))
        left -= n
        i += 1


def questions(spec: GraphSpec, n: int, seed: int = 11) -> list[str]:
    """Questions naming two entities of one generated sentence (or one, when it names one)."""
    vocab = Vocabulary(spec)
    rng = random.Random(f"{spec.seed}:{seed}:questions")
    picks = sorted(rng.sample(range(max(1, spec.sentences // 6)), min(n, max(1, spec.sentences // 6))))
    out: list[str] = []
    want = iter(picks)
    target = next(want, None)
    for p in passages(spec, vocab):
        if target is None:
            break
        if p.index == target:
            named = [vocab.names[e] for e in max(p.mentions, key=len)]
            out.append(f"What links {named[0]} and {named[1]}?" if len(named) > 1 else f"What is known about {named[0]}?")
            target = next(want, None)
    return out


def _unit(rng: np.random.Generator, centres: np.ndarray, topics: np.ndarray) -> np.ndarray:
    """Unit vectors near their topic's centre (cosine ~0.5 to it): clustered, like real ones."""
    v = centres[topics] + rng.standard_normal((len(topics), centres.shape[1])).astype(np.float32) / np.sqrt(centres.shape[1])
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    return v.astype(np.float32)


@dataclass
class _Layer:
    """The entity layer's aggregates, from a first pass over the corpus."""

    mention_count: np.ndarray
    chunk_count: np.ndarray
    pair_keys: np.ndarray  # a * n + b of each CO_OCCURS pair (a < b), once
    pair_counts: np.ndarray
    pair_first: np.ndarray  # the passage that first has the pair (its edge is written with it)
    pair_single: np.ndarray  # the pair occurs in one document only (its edge is owned by it)
    knn: np.ndarray  # (entity, entity) SEMANTICALLY_SIMILAR pairs
    links: np.ndarray  # distinct neighbours over CO_OCCURS and SEMANTICALLY_SIMILAR
    documents: np.ndarray  # per community: documents its members are mentioned in
    passages: int


def _chunk_entities(p: GenPassage) -> tuple[list[int], dict[int, int]]:
    """A passage's (= its one chunk's) entities in first-mention order, and the sentences
    naming each (the entity_graph step's ``count`` of a chunk mention)."""
    per: dict[int, int] = {}
    for m in p.mentions:
        for e in m:
            per[e] = per.get(e, 0) + 1
    return list(per), per


def _first_pass(spec: GraphSpec, vocab: Vocabulary, log: Callable[[str], None]) -> _Layer:
    n_ent = spec.entities + spec.hubs
    mention_count = np.zeros(n_ent, dtype=np.int64)
    chunk_count = np.zeros(n_ent, dtype=np.int64)
    keys: list[np.ndarray] = []
    owners: list[np.ndarray] = []
    community_docs: list[set[int]] = [set() for _ in range(spec.topics + 1)]
    count = 0
    for p in passages(spec, vocab):
        ents, per = _chunk_entities(p)
        for e, c in per.items():
            mention_count[e] += c
            chunk_count[e] += 1
            community_docs[vocab.topic_of(e, spec)].add(p.index)
        top = sorted(sorted(ents, key=lambda e: -per[e])[:CO_OCCURRING_MAX])
        if len(top) > 1:
            a, b = np.triu_indices(len(top), 1)
            t = np.asarray(top, dtype=np.int64)
            keys.append(t[a] * n_ent + t[b])
            owners.append(np.full(len(a), p.index, dtype=np.int64))
        count = p.index + 1
        if count % 50_000 == 0:
            log(f"graph-gen: first pass, {count:,} passages")
    all_keys = np.concatenate(keys) if keys else np.zeros(0, dtype=np.int64)
    all_owners = np.concatenate(owners) if owners else np.zeros(0, dtype=np.int64)
    # each pair once, with its number of chunks and the passages it spans (passages were
    # appended in order, so a stable sort keeps each pair's first passage first)
    order = np.argsort(all_keys, kind="stable")
    sorted_keys, sorted_owners = all_keys[order], all_owners[order]
    del keys, owners, all_keys, all_owners, order
    starts = np.flatnonzero(np.r_[True, sorted_keys[1:] != sorted_keys[:-1]]) if len(sorted_keys) else np.zeros(0, dtype=np.int64)
    pair_keys = sorted_keys[starts]
    pair_counts = np.diff(np.r_[starts, len(sorted_keys)])
    pair_first = sorted_owners[starts]
    pair_single = (np.maximum.reduceat(sorted_owners, starts) == pair_first) if len(starts) else np.zeros(0, dtype=bool)
    del sorted_keys, sorted_owners
    rng = np.random.default_rng([spec.seed, 1])
    mentioned = np.flatnonzero(mention_count)
    knn_pairs = []
    for members in vocab.per_topic:
        present = members[mention_count[members] > 0]
        if len(present) < 2:
            continue
        for _ in range(spec.knn):
            other = rng.permutation(present)
            keep = other != present
            knn_pairs.append(np.stack([present[keep], other[keep]], axis=1))
    knn = np.concatenate(knn_pairs) if knn_pairs else np.zeros((0, 2), dtype=np.int64)
    lo, hi = np.minimum(knn[:, 0], knn[:, 1]), np.maximum(knn[:, 0], knn[:, 1])
    linked = np.unique(np.concatenate([pair_keys, lo * n_ent + hi]))
    links = np.bincount(np.concatenate([linked // n_ent, linked % n_ent]), minlength=n_ent)
    log(f"graph-gen: {count:,} passages, {len(mentioned):,} entities, {len(pair_keys):,} co-occurring pairs")
    return _Layer(mention_count, chunk_count, pair_keys, pair_counts, pair_first, pair_single,
                  knn, links, np.array([len(d) for d in community_docs]), count)


def write_graph(store: Any, group: str, spec: GraphSpec, *, log: Callable[[str], None] = lambda _m: None) -> dict[str, Any]:
    """Write the generated index of ``spec`` into ``group`` (emptied first). Returns counts
    and timings."""
    from graphroute.core.api.components import Block, SourceDocument
    from graphroute.core.api.store import DocumentBatch, batched
    from graphroute.core.config.index_profile import load_index_profile
    from graphroute.core.index.pipeline import DOC_BATCH, embed_text_count, embed_windows
    from graphroute.core.index.skeleton import ParseLimits, doc_id_for, plan_document, skeletons

    t0 = time.perf_counter()
    vocab = Vocabulary(spec)
    layer = _first_pass(spec, vocab, log)
    n_ent = spec.entities + spec.hubs
    rng = np.random.default_rng([spec.seed, 2])
    centres = rng.standard_normal((spec.topics + 1, spec.dim)).astype(np.float32)
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    store.delete_group(group)
    timings: dict[str, float] = {"first_pass_s": round(time.perf_counter() - t0, 1)}

    # The store may build its vector indexes once at the end instead of per write
    # (Neo4j: GraphStore.bulk_load); timings say how long that build took.
    with store.bulk_load():
        # 1. entities (before any edge that names them) and their vectors
        t = time.perf_counter()
        mentioned = np.flatnonzero(layer.mention_count)
        ent_id = {int(e): vocab.entity_id(int(e)) for e in mentioned}
        entity_ids = frozenset(ent_id.values())
        own_pages = [0]  # OWN_PAGE edges written (documents titled with an entity's name)
        topic_of = np.array([vocab.topic_of(int(e), spec) for e in range(n_ent)])
        for start in range(0, len(mentioned), 5_000):
            part = mentioned[start : start + 5_000]
            nodes = []
            for e in part.tolist():
                name = vocab.names[e]
                c = int(topic_of[e])
                nodes.append(Node(id=ent_id[e], label=Label.ENTITY, group=group, props={
                    "name": name, "norm": normalize_name(name), "aliases": [name],
                    "mention_count": int(layer.mention_count[e]), "chunk_count": int(layer.chunk_count[e]),
                    "doc_count": int(layer.chunk_count[e]), "community": c, "links": int(layer.links[e]),
                }))
            vecs = _unit(rng, centres, topic_of[part])
            store.write(group, nodes, vectors={VectorSpace.ENTITY.value: ([n.id for n in nodes], vecs)})
        timings["entities_s"] = round(time.perf_counter() - t, 1)
        log(f"graph-gen: {len(mentioned):,} entities written")

        # 2. documents (the indexer's skeletons) with their mentions, co-occurrences and vectors
        t = time.perf_counter()
        profile = load_index_profile(None)
        limits = ParseLimits.of(profile.parse)
        spans_of: dict[str, list[tuple[int, int]]] = {}

        def split(texts: Sequence[str]) -> list[list[tuple[int, int]]]:
            return [spans_of.get(x, [(0, len(x))]) for x in texts]

        by_first: dict[int, list[int]] = {}
        for k, first in enumerate(layer.pair_first.tolist()):
            by_first.setdefault(first, []).append(k)
        section_of: list[str] = [""] * layer.passages
        doc_of: list[str] = [""] * layer.passages
        hubs_of: list[list[int]] = [[] for _ in range(layer.passages)]
        written = {"documents": 0, "sentences": 0, "chunks": 0, "mentions": 0, "co_occurs": 0}

        def docs() -> Iterator[tuple[DocumentBatch, int, list[Edge]]]:
            batch: list[GenPassage] = []
            for p in passages(spec, vocab):
                batch.append(p)
                if len(batch) == DOC_BATCH:
                    yield build(batch)
                    batch = []
            if batch:
                yield build(batch)

        def build(batch: list[GenPassage]) -> tuple[DocumentBatch, int, list[Edge]]:
            sources = []
            for p in batch:
                spans, pos = [], 0
                for s in p.sentences:
                    spans.append((pos, pos + len(s)))
                    pos += len(s) + 1
                text = " ".join(p.sentences)
                spans_of[text] = spans
                sources.append(SourceDocument(title=p.title, source=f"graphgen#{p.index}",
                                              blocks=[Block(kind="paragraph", text=text)], content_hash=str(p.index)))
            sks = skeletons([plan_document(d, doc_id_for(d.source)) for d in sources], split, group, limits)
            spans_of.clear()
            # MENTIONS leave from the batch's own chunks and sentences (written with them, as
            # new edges); CO_OCCURS join two stored entities (written after, through MERGE)
            mention_edges: list[Edge] = []
            entity_edges: list[Edge] = []
            sent_vecs, chunk_vecs, sids, cids = [], [], [], []
            for p, sk in zip(batch, sks, strict=True):
                if len(sk.chunk_ids) != 1 or len(sk.sentence_ids) != len(p.sentences):
                    raise RuntimeError(f"graph-gen: passage {p.index} did not make one chunk of its sentences")
                chunk, doc = sk.chunk_ids[0], sk.doc_id
                doc_of[p.index] = doc
                section_of[p.index] = sk.sentence_sections[0]
                ents, per = _chunk_entities(p)
                page = own_page_entity(p.title, entity_ids)
                if page is not None:
                    entity_edges.append(Edge(src=chunk, dst=page, type=EdgeType.OWN_PAGE, group=group, doc_id=doc))
                    own_pages[0] += 1
                hubs_of[p.index] = sorted(ents, key=lambda e: (-per[e], e))[:3]
                for e in ents:
                    mention_edges.append(Edge(src=chunk, dst=ent_id[e], type=EdgeType.MENTIONS, group=group, doc_id=doc,
                                              props={"level": "chunk", "count": per[e]}))
                for sid, named in zip(sk.sentence_ids, p.mentions, strict=True):
                    for e in named:
                        mention_edges.append(Edge(src=sid, dst=ent_id[e], type=EdgeType.MENTIONS, group=group, doc_id=doc,
                                                  props={"level": "sentence"}))
                for k in by_first.pop(p.index, ()):
                    key = int(layer.pair_keys[k])
                    a, b = key // n_ent, key % n_ent
                    entity_edges.append(Edge(src=ent_id[a], dst=ent_id[b], type=EdgeType.CO_OCCURS, group=group,
                                             doc_id=doc if layer.pair_single[k] else None,
                                             props={"count": int(layer.pair_counts[k])}))
                    written["co_occurs"] += 1
                sids += sk.sentence_ids
                cids += sk.chunk_ids
                sent_vecs.append(np.full(len(sk.sentence_ids), p.topic))
                chunk_vecs.append(np.array([p.topic]))
                written["documents"] += 1
                written["sentences"] += len(sk.sentence_ids)
                written["chunks"] += 1
                written["mentions"] += sum(len(m) for m in p.mentions) + len(ents)
            vectors = {VectorSpace.SENTENCE.value: (sids, _unit(rng, centres, np.concatenate(sent_vecs))),
                       VectorSpace.CHUNK.value: (cids, _unit(rng, centres, np.concatenate(chunk_vecs)))}
            nodes = [n for sk in sks for n in sk.nodes]
            edges = [e for sk in sks for e in sk.edges] + mention_edges
            return DocumentBatch(nodes, edges, vectors), embed_text_count(sks), entity_edges

        def put(window: list[tuple[DocumentBatch, int, list[Edge]]], co_occurs: list[Edge]) -> None:
            store.write_batches(group, [b for b, _, _ in window])
            for part in batched(co_occurs, 20_000):
                store.write(group, edges=part)

        # One window is written while the next is built: the client's share (skeletons, edge
        # objects, packing) overlaps the server's instead of adding to it.
        pending: list[Edge] = []
        with ThreadPoolExecutor(1, thread_name_prefix="graph-gen-write") as writer:
            in_flight: Future[None] | None = None
            for window in embed_windows(docs(), lambda b: b[1]):
                pending += [e for _, _, es in window for e in es]
                cut = len(pending) - len(pending) % 20_000
                if in_flight is not None:
                    in_flight.result()
                in_flight = writer.submit(put, window, pending[:cut])
                pending = pending[cut:]
                if written["documents"] % 10_000 < DOC_BATCH * len(window):
                    log(f"graph-gen: {written['documents']:,} documents, {written['sentences']:,} sentences")
            if in_flight is not None:
                in_flight.result()
        if pending:
            store.write(group, edges=pending)
        timings["documents_s"] = round(time.perf_counter() - t, 1)

        # 3. similarity, hubs and shared hubs, communities
        t = time.perf_counter()
        sim = rng.uniform(0.6, 0.95, len(layer.knn))
        extra: list[Edge] = [Edge(src=ent_id[int(a)], dst=ent_id[int(b)], type=EdgeType.SEMANTICALLY_SIMILAR, group=group,
                                  props={"similarity": round(float(s), 4)}) for (a, b), s in zip(layer.knn, sim, strict=True)]
        by_topic: dict[int, list[int]] = {}
        topics_of = np.empty(layer.passages, dtype=np.int64)
        for p in passages(spec, vocab):  # topics again, without the skeletons
            topics_of[p.index] = p.topic
            by_topic.setdefault(p.topic, []).append(p.index)
        for _t, idx in by_topic.items():
            arr = np.asarray(idx)
            for _ in range(spec.knn):
                other = rng.permutation(arr)
                for x, y in zip(arr.tolist(), other.tolist(), strict=True):
                    if x != y:
                        extra.append(Edge(src=section_of[x], dst=section_of[y], type=EdgeType.SEMANTICALLY_SIMILAR, group=group,
                                          props={"similarity": round(float(rng.uniform(0.6, 0.95)), 4)}))
        last_with_hub: dict[int, int] = {}
        for i in range(layer.passages):
            for e in hubs_of[i]:
                extra.append(Edge(src=section_of[i], dst=ent_id[e], type=EdgeType.HAS_HUB_ENTITY, group=group, doc_id=doc_of[i]))
                j = last_with_hub.get(e)
                if j is not None:
                    extra.append(Edge(src=section_of[j], dst=section_of[i], type=EdgeType.SHARES_ENTITY, group=group,
                                      props={"hub": ent_id[e]}))
                last_with_hub[e] = i
        for edge_part in batched(extra, 20_000):
            store.write(group, edges=edge_part)
        comm_nodes: list[Node] = []
        belongs: list[Edge] = []
        for c in range(spec.topics + 1):
            members = [int(e) for e in (vocab.per_topic[c] if c < spec.topics else vocab.hub_ids) if layer.mention_count[e] > 0]
            if len(members) < 2:
                continue
            by_links = sorted(members, key=lambda e: (-int(layer.links[e]), ent_id[e]))
            by_mentions = sorted(members, key=lambda e: (-int(layer.mention_count[e]), ent_id[e]))
            top = [vocab.names[e] for e in by_links[:8]]
            comm_nodes.append(Node(id=f"{COMMUNITY_ID_PREFIX}{c}", label=Label.COMMUNITY, group=group, props={
                "community": c, "size": len(members), "title": ", ".join(top[:3]), "summary": "; ".join(top),
                "top_entities": top, "top_entity_ids": [ent_id[e] for e in by_links[:8]], "summary_source": "generated",
                "peer_ids": [ent_id[e] for e in by_links[:LISTED]], "mentioned_ids": [ent_id[e] for e in by_mentions[:LISTED]],
                "documents": int(layer.documents[c]),
            }))
            belongs += [Edge(src=ent_id[e], dst=f"{COMMUNITY_ID_PREFIX}{c}", type=EdgeType.BELONGS_TO, group=group) for e in members]
        comm_topics = np.array([int(n.props["community"]) for n in comm_nodes])
        store.write(group, comm_nodes, vectors={VectorSpace.COMMUNITY.value: ([n.id for n in comm_nodes], _unit(rng, centres, comm_topics))})
        for edge_part in batched(belongs, 20_000):
            store.write(group, edges=edge_part)
        timings["layers_s"] = round(time.perf_counter() - t, 1)
        t = time.perf_counter()
    timings["indexes_s"] = round(time.perf_counter() - t, 1)
    timings["total_s"] = round(time.perf_counter() - t0, 1)
    store.set_meta(group, "graphgen", asdict(spec))
    store.set_meta(group, OWN_PAGES_META, {"edges": own_pages[0]})
    return {"spec": asdict(spec), "written": {**written, "entities": len(mentioned), "communities": len(comm_nodes),
            "similar_edges": len(layer.knn), "co_occurring_pairs": len(layer.pair_keys),
            "own_page_edges": own_pages[0]}, "timings": timings,
            "counts": store.counts(group)}
