"""Route 5 seed tiers (route5 reference §2): structural and thematic seeds, the weight
profile, and the unified seed builder that turns three tiers into one PPR teleport vector.

* Tier 1 (entity) comes from ner_seeds + seed_resolution (entity_seeds.py).
* Tier 2 (structural_seeds) is derived bottom-up from sentence hits aggregated by section,
  never from embedded titles (§2.2: titles are labels, not content); a keyword match on
  section titles is only the fallback when no section collects ``min_sentences`` hits.
* Tier 3 (thematic_seeds) matches the question to community summary vectors.
* weight_profile classifies the question into one of the five profiles of §2.3 and sets
  (w1, w2, w3); unified_seeds normalises within tiers, hands an empty tier's weight on
  (§2.2: an empty structural tier's share goes to the thematic tier; generalised: to the next
  non-empty tier, cyclically), and sets the damping ``0.70 + 0.20 * w1`` (§2.5).
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import replace
from itertools import chain
from typing import Annotated, Any, Literal

import numpy as np
import regex
from graphroute.core.api.models import EdgeType, Label, Seed, SeedArray
from graphroute.core.api.stage import (
    DampingRule,
    QueryState,
    Slot,
    Stage,
    StageContext,
    StageKind,
    StageParams,
)
from graphroute.core.api.store import GraphStore, counted_nodes, per_version
from graphroute.core.api.values import echo
from graphroute.core.errors import LLMOutputError
from graphroute.core.hookspecs import hookimpl
from graphroute.core.lib.communities import THEMATIC_COMMUNITIES
from graphroute.core.lib.deadline import remaining, timed_out
from graphroute.core.lib.llm import LLMStageParams, complete_json, record_usage
from graphroute.core.lib.topk import largest
from graphroute.plugins.baselines.lexical import lexical_hits
from pydantic import BaseModel, ConfigDict, Field, field_validator

from .communities import documents, most_mentioned

TIERS: tuple[str, ...] = ("entity", "structural", "thematic")
TIER_KEYS: dict[str, str] = {"entity": "w1", "structural": "w2", "thematic": "w3"}
PASSAGE_TIER = "passage"  # optional fourth input (passage_seeds): not part of the reference's three tiers

_STOP = frozenset(
    ["what", "which", "who", "whom", "whose", "when", "where", "why", "how", "is", "are", "was", "were", "be", "been", "do", "does", "did", "the", "a", "an", "in", "on", "of", "for", "to", "and", "or", "by", "with", "from", "at", "as", "that", "this", "these", "those", "it", "its", "there", "their", "they", "about", "into", "over", "under", "between", "across", "all", "any", "each", "other", "than", "then", "also", "more", "most", "some", "such", "have", "has", "had", "not", "no", "nor", "can", "could", "would", "should", "will", "shall", "may", "might", "must"]
)


def content_words(text: str, min_chars: int = 4) -> list[str]:
    """Lower-case content words of a query, in order, without duplicates."""
    words = re.findall(r"[a-z0-9]+", text.lower())
    return list(dict.fromkeys(w for w in words if len(w) >= min_chars and w not in _STOP))


# --------------------------------------------------------------------------- tier 2


def section_of_chunks(store: GraphStore, group: str, chunk_ids: Sequence[str]) -> dict[str, str]:
    """chunk id -> its Section id (IN_SECTION), read for these chunks alone."""
    asked = list(dict.fromkeys(chunk_ids))
    nb = store.neighbours(group, asked, [EdgeType.IN_SECTION], other_labels=[Label.SECTION])
    found: dict[str, str] = {}
    for c, sec in zip(nb.node, nb.other, strict=True):
        if nb.labels.get(c) == Label.CHUNK:
            found.setdefault(c, sec)
    return {c: found[c] for c in asked if c in found}


def section_entities(store: GraphStore, group: str, section_ids: Sequence[str]) -> dict[str, dict[str, int]]:
    """section id -> {entity id: mentions in the section's chunks} (section -> chunks ->
    entities), read for these sections alone: two bounded store reads, no group-wide map."""
    members = store.neighbours(group, list(dict.fromkeys(section_ids)), [EdgeType.IN_SECTION], other_labels=[Label.CHUNK])
    chunks_of: dict[str, list[str]] = defaultdict(list)
    for sec, c in zip(members.node, members.other, strict=True):
        chunks_of[sec].append(c)
    mentions = store.neighbours(group, list(dict.fromkeys(members.other)), [EdgeType.MENTIONS], other_labels=[Label.ENTITY])
    entities_of: dict[str, dict[str, None]] = defaultdict(dict)  # a chunk's entities, once each
    for c, ent in zip(mentions.node, mentions.other, strict=True):
        entities_of[c][ent] = None
    out: dict[str, dict[str, int]] = {}
    for sec in section_ids:
        counts: dict[str, int] = defaultdict(int)
        for c in dict.fromkeys(chunks_of.get(sec, ())):
            for ent in entities_of.get(c, ()):
                counts[ent] += 1
        out[sec] = dict(counts)
    return out


def aggregate_sections(hits: Sequence[tuple[str, float]], sections: Mapping[str, str], min_sentences: int) -> list[tuple[str, float, int]]:
    """Sentence hits -> [(section, summed score, hits)] for sections with >= min_sentences
    hits, best first (route5 §2.2 ``derive_structural_seeds``)."""
    score: dict[str, float] = defaultdict(float)
    count: dict[str, int] = defaultdict(int)
    for sid, s in hits:
        sec = sections.get(sid)
        if sec is None:
            continue
        score[sec] += float(s)
        count[sec] += 1
    rows = [(sec, score[sec], count[sec]) for sec in score if count[sec] >= min_sentences]
    rows.sort(key=lambda r: (-r[1], r[0]))
    return rows


def spread(section_weight: float, counts: Mapping[str, int], limit: int) -> dict[str, float]:
    """A section's weight spread over its ``limit`` most-mentioned entities, by mentions."""
    top = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:limit]
    total = sum(c for _, c in top)
    return {e: section_weight * c / total for e, c in top} if total else {}


class StructuralSeeds(Stage):
    """Tier 2: sections collecting >= min_sentences sentence hits -> their entities become seeds."""

    name = "structural_seeds"
    kind = StageKind.SEED_SOURCE
    consumes = (Slot.QUERY,)
    produces = (Slot.SEEDS,)

    class Params(StageParams):
        k: int = Field(30, ge=1, le=1000, description="Sentence vector hits aggregated (the reference's top-30).")
        min_sentences: int = Field(2, ge=1, le=100, description="Hits a section needs to become a structural seed.")
        max_sections: int = Field(5, ge=1, le=100, description="Structural seed sections kept, best summed score first.")
        entities_per_section: int = Field(20, ge=1, le=1000, description="Most-mentioned entities of a section that become seeds.")
        keyword_fallback: bool = Field(True, description="When no section qualifies, match query words against section titles.")
        keyword_engine: Literal["auto", "client"] = Field(
            "auto",
            description="Where the keyword fallback matches titles. auto: the store's index of section titles "
            "where it keeps one (Neo4j: the titles holding a query word, at most 20,000 index hits ranked), else "
            "an index of the group's section titles built in the client once per store version; client: always that.",
        )

    params: Params

    def run(self, state: QueryState, ctx: StageContext) -> None:
        p = self.params
        store = ctx.services.store
        hits = store.vector_search(state.group, "sentence", ctx.query_vector(state.question), p.k)
        sent_nodes = store.get_nodes(state.group, [i for i, _ in hits])
        chunk_of = {n.id: str(n.props.get("chunk_id") or "") for n in sent_nodes}
        # a sentence names its section's path: the trace's titles without reading the sections
        titles = {str(n.props["section_id"]): str(n.props["section_path"])
                  for n in sent_nodes if n.props.get("section_id") and n.props.get("section_path")}
        sec_of_chunk = section_of_chunks(store, state.group, [c for c in chunk_of.values() if c])
        sent_sec = {sid: sec_of_chunk[c] for sid, c in chunk_of.items() if c in sec_of_chunk}
        rows = aggregate_sections(hits, sent_sec, p.min_sentences)[: p.max_sections]
        mode = "sentences"
        if not rows and p.keyword_fallback:
            rows, engine = self._keyword_sections(store, state.group, state.question)
            mode = "keyword_fallback" if rows else "none"
            ctx.stats["keyword_engine"] = engine
        elif not rows:
            mode = "none"
        ents = section_entities(store, state.group, [r[0] for r in rows])
        weights: dict[str, float] = defaultdict(float)
        for sec, score, _ in rows:
            for e, w in spread(score, ents.get(sec, {}), p.entities_per_section).items():
                weights[e] += w
        for e, w in sorted(weights.items(), key=lambda kv: (-kv[1], kv[0])):
            state.seeds.append(Seed(name=e.removeprefix("ent:"), node_id=e, weight=w, tier="structural", strategy=mode))
        untitled = [r[0] for r in rows if r[0] not in titles]
        if untitled:  # keyword fallback, or sentences that do not name their section
            titles.update({n.id: str(n.props.get("path") or n.props.get("section_path") or n.props.get("title") or n.id)
                           for n in store.get_nodes(state.group, untitled)})
        ctx.stats.update(
            {
                "mode": mode,
                "sentence_hits": len(hits),
                "sections": [{"section": titles.get(s, s), "score": round(sc, 4), "hits": c} for s, sc, c in rows],
                "seeds": len(weights),
            }
        )

    def _keyword_sections(self, store: GraphStore, group: str, question: str) -> tuple[list[tuple[str, float, int]], str]:
        """The sections whose titles hold the most of the question's content words (then by
        id), and where they were matched."""
        words = content_words(question)
        if not words:
            return [], "none"
        k = self.params.max_sections
        found = store.sections_by_title(group, words, k) if self.params.keyword_engine == "auto" else None
        if found is not None:
            return [(sec, float(h), h) for sec, h in found], "store title index"
        index = title_index(store, group)
        hits: dict[str, int] = defaultdict(int)
        for w in words:  # a title word is a whole \w+ run, as a \bword\b match would find it
            for sec in index.get(w, ()):
                hits[sec] += 1
        rows = [(sec, float(h), h) for sec, h in hits.items()]
        rows.sort(key=lambda r: (-r[1], r[0]))
        return rows[:k], "client title index"


def title_index(store: GraphStore, group: str) -> dict[str, list[str]]:
    """Lower-cased section-title word -> section ids, built once per store version: the
    keyword fallback read and regex-matched every Section node per query (at 15k sections of
    the 100k-sentence benchmark corpus, ~0.5 s a question)."""
    return per_version(store, group, "section_title_index", lambda: _build_title_index(store, group))


def _build_title_index(store: GraphStore, group: str) -> dict[str, list[str]]:
    index: dict[str, list[str]] = defaultdict(list)
    for n in store.iter_nodes(group, Label.SECTION):
        for w in dict.fromkeys(re.findall(r"\w+", str(n.props.get("title") or "").lower())):
            index[w].append(n.id)
    return dict(index)


# --------------------------------------------------------------------------- tier 3


class ThematicSeeds(Stage):
    """Tier 3: communities whose summary vectors match the question -> member entities become seeds."""

    name = "thematic_seeds"
    kind = StageKind.SEED_SOURCE
    consumes = (Slot.QUERY,)
    produces = (Slot.SEEDS,)

    class Params(StageParams):
        communities: int = Field(3, ge=1, le=100, description="Best-matching communities used.")
        min_similarity: float = Field(0.2, ge=-1.0, le=1.0, description="Cosine a community summary needs.")
        members_per_community: int = Field(10, ge=1, le=1000, description="Most-mentioned members of a community that become seeds.")
        min_documents: int = Field(
            2, ge=1, le=1000,
            description="Documents a community's members must be mentioned in for it to count as a theme "
            "(capped at the group's document count); a community inside one document is that document's "
            "own entity cluster.",
        )

    params: Params

    def run(self, state: QueryState, ctx: StageContext) -> None:
        p = self.params
        store = ctx.services.store
        hits = [(c, s) for c, s in store.vector_search(state.group, "community", ctx.query_vector(state.question), p.communities) if s >= p.min_similarity]
        # each hit's members and span, read from its Community node (communities.py)
        comm_nodes = {n.id: n for n in store.get_nodes(state.group, [c for c, _ in hits])}
        skipped: list[str] = []
        need = min(p.min_documents, counted_nodes(store, state.group, Label.DOCUMENT))
        if need > 1:
            # Tier 3 exists to spread activation across documents (route5 §2.2: not "trapped"
            # in one document); a one-document community would hand its whole share to a
            # single passage's entities instead.
            skipped = [c for c, _ in hits if documents(store, state.group, comm_nodes.get(c), c) < need]
            hits = [(c, s) for c, s in hits if c not in skipped]
        weights: dict[str, float] = defaultdict(float)
        for c, sim in hits:
            top = most_mentioned(store, state.group, comm_nodes.get(c), c, p.members_per_community)
            for m in top:
                weights[m] += max(sim, 0.0) / len(top)
        for e, w in sorted(weights.items(), key=lambda kv: (-kv[1], kv[0])):
            if w > 0:
                state.seeds.append(Seed(name=e.removeprefix("ent:"), node_id=e, weight=w, tier="thematic", strategy="community"))
        state.extras[THEMATIC_COMMUNITIES] = [c for c, _ in hits]
        ctx.stats.update(
            {
                "communities": [
                    {"community": c, "title": str(comm_nodes[c].props.get("title") or "") if c in comm_nodes else "",
                     "similarity": round(s, 4), "members": int(comm_nodes[c].props.get("size") or 0) if c in comm_nodes else 0}
                    for c, s in hits
                ],
                "seeds": len(weights),
                **({"skipped_single_document": skipped} if skipped else {}),
            }
        )


# --------------------------------------------------------------------------- passage tier


class PassageSeeds(Stage):
    """Passage tier (HippoRAG 2): the best chunk hits (dense, or BM25) seed PPR on their own TextChunk nodes."""

    name = "passage_seeds"
    kind = StageKind.SEED_SOURCE
    consumes = (Slot.QUERY,)
    produces = (Slot.SEEDS,)

    class Params(StageParams):
        top_k: int = Field(10, ge=1, le=1000, description="Chunk hits that become passage seeds.")
        source: Literal["dense", "bm25"] = Field(
            "dense",
            description="How passages are scored: chunk vector cosine (HippoRAG 2), or BM25 over the chunk "
            "texts with their titles (the bm25 stage's ranking: the store's full-text index where it keeps "
            "one, as Neo4j does, else bm25s in the client). Two passage_seeds stages, one of each, add up "
            "in the passage tier (each min-max scaled: CombSUM), so a passage found by its rare words "
            "(a product name, a code) seeds PPR even when its cosine is middling.",
        )
        min_score: float = Field(0.0, ge=-1.0, le=1.0, description="Cosine a hit needs to seed (weights are the cosines; dense only).")
        normalize: Literal["cosine", "minmax"] = Field(
            "cosine",
            description="Seed weights: the raw cosines, or min-max scaled over the hits (HippoRAG 2), which "
            "separates the best hits from the rest instead of giving all ten nearly the same mass.",
        )
        min_lead: float = Field(
            1.0, ge=1.0, le=100.0,
            description="bm25 only: no seeds unless the best passage's BM25 score is at least this many times the "
            "score at `lead_rank` (the bm25 stage's `min_lead`; 1: always seed).",
        )
        lead_rank: int = Field(5, ge=2, le=1000, description="bm25 only: the rank `min_lead` compares the best passage with.")

    params: Params

    def run(self, state: QueryState, ctx: StageContext) -> None:
        # HippoRAG 2 (Gutierrez et al., 2025) puts dense passage scores into the teleport
        # vector next to the phrase seeds, so context-rich passages pull PPR mass even when
        # NER misses the question's entities; weights stay the raw cosines here and are
        # normalised as a tier by unified_seeds (passage weight ``w_passage``).
        p = self.params
        if p.source == "bm25":
            found = lexical_hits(ctx.services.store, state.group, state.question, p.top_k,
                                 min_lead=p.min_lead, lead_rank=p.lead_rank)
            hits = found.hits
            ctx.stats.update(found.gate_stats())
        else:
            hits = ctx.services.store.vector_search(state.group, "chunk", ctx.query_vector(state.question), p.top_k)
        scores = np.fromiter((s for _, s in hits), dtype=np.float64, count=len(hits))
        keep = (scores >= (p.min_score if p.source == "dense" else 0.0)) & (scores > 0)
        weights = scores
        if p.normalize == "minmax" and keep.any():
            lo, hi = scores[keep].min(), scores[keep].max()
            if hi > lo:
                # the lowest hit scales to 0 and drops out
                weights = (scores - lo) / (hi - lo)
                keep &= scores > lo
            else:  # all equal: every hit weighs 1
                weights = np.ones_like(scores)
        rows = np.flatnonzero(keep)
        # one SeedArray, not ~1,000 Seed records (see SeedArray)
        seeds = SeedArray(tuple(hits[i][0] for i in rows), weights[rows], PASSAGE_TIER, "chunk_vector" if p.source == "dense" else "bm25")
        state.seed_arrays.append(seeds)
        top = [{"chunk": c, "score": round(w, 4)} for c, w in zip(seeds.node_ids[:5], seeds.weights[:5].tolist(), strict=True)]
        ctx.stats.update({"hits": len(hits), "seeds": len(seeds), "top": top})


# --------------------------------------------------------------------------- weight profile


# what one route (or one request's override) may give weight_profile: the shipped profiles
# use 5 of each and 2-6 cues; each example is embedded, each cue run on the question
MAX_PROFILES = 20
MAX_CUES = 20
MAX_CUE_CHARS = 500
MAX_EXAMPLES = 20
MAX_EXAMPLE_CHARS = 1000
EXAMPLE_CACHE_SIZE = 64  # sets of embedded examples kept (a route's profiles are one set each)

Cue = Annotated[str, Field(min_length=1, max_length=MAX_CUE_CHARS)]
Example = Annotated[str, Field(min_length=1, max_length=MAX_EXAMPLE_CHARS)]


class Profile(BaseModel):
    """One query type of route5 §2.3: tier weights plus the cues that recognise it."""

    model_config = ConfigDict(extra="forbid")

    w1: float = Field(ge=0.0, le=1.0, description="Entity tier weight.")
    w2: float = Field(ge=0.0, le=1.0, description="Structural tier weight.")
    w3: float = Field(ge=0.0, le=1.0, description="Thematic tier weight.")
    cues: list[Cue] = Field(
        default_factory=list, max_length=MAX_CUES,
        description=f"Case-insensitive regexes (at most {MAX_CUES}, {MAX_CUE_CHARS} characters each); each match is a vote.",
    )
    examples: list[Example] = Field(
        default_factory=list, max_length=MAX_EXAMPLES,
        description=f"Example questions for the embedding classifier (at most {MAX_EXAMPLES}, {MAX_EXAMPLE_CHARS} characters each).",
    )

    @field_validator("cues")
    @classmethod
    def _compiles(cls, cues: list[str]) -> list[str]:
        for cue in cues:
            try:
                regex.compile(cue, regex.IGNORECASE)
            except regex.error as exc:
                raise ValueError(f"cue {echo(cue, quote=True)} is not a regular expression: {exc}") from None
        return cues


DEFAULT_PROFILES: dict[str, Profile] = {
    "fact_extraction": Profile(
        w1=0.6, w2=0.3, w3=0.1,
        cues=[r"^\s*(who|when|where|which)\b", r"^\s*what (is|was) the (name|date|year|number|amount)\b",
              r"\bhow (many|much|old|long)\b", r"\bwhat year\b"],
        examples=["Who is the Agent?", "When was the company founded?", "What is the capital of France?",
                  "How many employees does the firm have?"],
    ),
    "clause_analysis": Profile(
        w1=0.3, w2=0.5, w3=0.2,
        cues=[r"\b(terms?|clauses?|provisions?|conditions|obligations|requirements|policy|policies|warranty|section)\b",
              r"\bwhat does (the|this) \w+ (say|state|require)\b"],
        examples=["What are the warranty terms?", "What does the agreement say about termination?",
                  "What are the payment conditions in the contract?"],
    ),
    "cross_doc_comparison": Profile(
        w1=0.2, w2=0.3, w3=0.5,
        cues=[r"\bcompar(e|es|ed|ing|ison)\b", r"\bdiffer(s|ence|ences|ent)?\b", r"\bacross\b", r"\bversus\b|\bvs\.?\b",
              r"\b(both|each of the|all of the) (documents?|agreements?|contracts?|reports?)\b", r"\bsimilarit(y|ies)\b"],
        examples=["Compare termination clauses across agreements", "How do the two contracts differ on fees?",
                  "What is the difference between the policies of both companies?"],
    ),
    "thematic_survey": Profile(
        w1=0.1, w2=0.2, w3=0.7,
        cues=[r"\b(main|key|common|recurring|overall) (themes?|topics?|trends?|ideas?|issues?)\b", r"\bsummari[sz]e\b",
              r"\boverview\b", r"\bwhat (is|are) (this|these) (corpus|documents?|collection)\b", r"\bin general\b"],
        examples=["What are the main themes across all documents?", "Give an overview of the collection",
                  "Summarize the key topics discussed"],
    ),
    "multi_hop": Profile(
        w1=0.5, w2=0.3, w3=0.2,
        cues=[r"\binconsistenc(y|ies)\b", r"\b(of|by|for|to|with) the \w+( \w+)? (of|who|that|which|whose|by)\b",
              r"\bwhose\b", r"\b\w+'s \w+'s\b", r"\b(of|by) the (performer|author|director|founder|creator|spouse|father|mother|owner)\b"],
        examples=["What inconsistencies exist between invoice and contract?", "Who is the spouse of the director of Titanic?",
                  "In which country was the founder of the company born?", "What is the birthplace of the author of the novel?"],
    ),
}


_example_cache: OrderedDict[tuple[str, tuple[str, ...]], np.ndarray] = OrderedDict()
_example_lock = threading.Lock()


def cue_matches(cue: str, question: str) -> bool:
    """Whether ``cue`` matches the question. Run by the ``regex`` module, which lets other
    threads run meanwhile and stops at the query's deadline: a cue that backtracks
    exponentially (``(a|aa)+$``) ends in QueryTimeoutError, not a frozen server."""
    left = remaining()
    try:
        return regex.search(cue, question, regex.IGNORECASE, timeout=None if left is None else max(left, 0.0)) is not None
    except TimeoutError:
        timed_out("weight_profile cue")


def cue_votes(question: str, profiles: Mapping[str, Profile]) -> dict[str, int]:
    return {name: sum(1 for c in prof.cues if cue_matches(c, question)) for name, prof in profiles.items()}


def classify(
    question: str,
    profiles: Mapping[str, Profile],
    *,
    similarity: Mapping[str, float] | None = None,
    default: str,
) -> tuple[str, str]:
    """(profile, how): most cue votes wins; ties and no-votes go to the best example
    similarity when given; otherwise the default profile."""
    votes = cue_votes(question, profiles)
    best = max(votes.values(), default=0)
    cands = [n for n, v in votes.items() if v == best] if best > 0 else list(profiles)
    if len(cands) == 1:
        return cands[0], "cues"
    if similarity:
        pick = max(cands, key=lambda n: (similarity.get(n, -1.0), n == default))
        return pick, "cues+embedding" if best > 0 else "embedding"
    if default in cands:
        return default, "default"
    return sorted(cands)[0], "default"


class ProfileChoice(BaseModel):
    """The classifier's reply: ``{"profile": "<type>"}``."""

    profile: str


def damping_for(w1: float, base: float = 0.70, slope: float = 0.20) -> float:
    """route5 §2.5: more entity weight -> higher damping (local); more thematic -> lower."""
    return DampingRule(base, slope).damping(w1)


class WeightProfile(Stage):
    """Classify the query type and set the tier weights (w1, w2, w3) and PPR damping."""

    name = "weight_profile"
    kind = StageKind.SEED_SOURCE
    consumes = (Slot.QUERY,)
    produces = (Slot.TIER_WEIGHTS, Slot.DAMPING)

    class Params(LLMStageParams):
        profiles: dict[str, Profile] = Field(
            default_factory=lambda: {k: v.model_copy(deep=True) for k, v in DEFAULT_PROFILES.items()},
            min_length=1, max_length=MAX_PROFILES,
            description=f"Query type -> weights, cue regexes, examples (route5 §2.3 table by default). At most {MAX_PROFILES} "
            f"profiles, each with at most {MAX_CUES} cues of {MAX_CUE_CHARS} characters and {MAX_EXAMPLES} examples of "
            f"{MAX_EXAMPLE_CHARS:,} characters; a cue runs with the query's time limit.",
        )
        classifier: Literal["offline", "llm"] = Field(
            "offline", description="offline: cue regexes then nearest example embedding; llm: ask the configured LLM (offline fallback)."
        )
        profile: str | None = Field(None, description="Force one profile (skip classification).")
        default_profile: str = Field("multi_hop", description="Used when nothing decides (the reference's 0.5/0.3/0.2 default).")
        use_embeddings: bool = Field(True, description="Break ties / no-cue cases by similarity to the profiles' examples.")
        damping: float | None = Field(None, gt=0.0, lt=1.0, description="Fixed PPR damping; null: 0.70 + 0.20 * w1.")
        damping_base: float = Field(0.70, gt=0.0, lt=1.0, description="Damping at w1 = 0.")
        damping_slope: float = Field(0.20, ge=0.0, lt=1.0, description="Damping added per unit of w1.")

    params: Params

    def run(self, state: QueryState, ctx: StageContext) -> None:
        p = self.params
        profiles = p.profiles
        how = "fixed"
        if p.profile is not None:
            if p.profile not in profiles:
                raise ValueError(f"weight_profile.profile {p.profile!r} is not one of {sorted(profiles)}")
            name = p.profile
        else:
            name, how = "", ""
            llm = ctx.services.stage_llm(p.llm, p.llm_params) if p.classifier == "llm" else None
            if llm is not None:
                name = self._llm(state.question, llm, ctx)
                how = "llm" if name else ""
            if not name:
                sim = self._similarity(state.question, ctx) if p.use_embeddings else None
                name, how = classify(state.question, profiles, similarity=sim, default=p.default_profile if p.default_profile in profiles else next(iter(profiles)))
        prof = profiles[name]
        state.profile = name
        state.tier_weights = {"w1": prof.w1, "w2": prof.w2, "w3": prof.w3}
        state.damping_rule = DampingRule(p.damping_base, p.damping_slope, fixed=p.damping is not None)
        state.damping = p.damping if p.damping is not None else state.damping_rule.damping(prof.w1)
        ctx.stats.update(
            {"profile": name, "how": how, "weights": dict(state.tier_weights), "damping": round(state.damping, 4),
             "votes": cue_votes(state.question, profiles)}
        )

    def _similarity(self, question: str, ctx: StageContext) -> dict[str, float] | None:
        try:
            q = ctx.query_vector(question)
            emb = ctx.services.embedder()
        except Exception:
            return None
        out: dict[str, float] = {}
        for name, prof in self.params.profiles.items():
            if not prof.examples:
                continue
            key = (emb.model_id, tuple(prof.examples))
            with _example_lock:
                vecs = _example_cache.get(key)
                if vecs is not None:
                    _example_cache.move_to_end(key)
            if vecs is None:
                vecs = np.asarray(emb.embed(prof.examples, input_type="query"), dtype=np.float32)
                with _example_lock:
                    _example_cache[key] = vecs
                    while len(_example_cache) > EXAMPLE_CACHE_SIZE:
                        _example_cache.popitem(last=False)
            out[name] = float(np.max(vecs @ np.asarray(q, dtype=np.float32)))
        return out

    def _llm(self, question: str, llm: Any, ctx: StageContext) -> str:
        """The profile the model picks; "" (offline classification follows) when it names
        none of the profiles, replies with no valid JSON, refuses or cannot be reached."""
        lines = [f"- {n}: e.g. {'; '.join(p.examples[:2])}" for n, p in self.params.profiles.items()]
        messages = [
            {"role": "system", "content": "Classify the question into one query type. Types:\n" + "\n".join(lines)
             + '\nReturn JSON: {"profile": "<type>"}'},
            {"role": "user", "content": question},
        ]
        try:
            out, resp = complete_json(llm, messages, ProfileChoice, max_tokens=50)
        except Exception as exc:
            if isinstance(exc, LLMOutputError):
                record_usage(ctx, exc.usage)
            ctx.stats["llm_error"] = f"{type(exc).__name__}: {exc}"[:200]
            return ""
        record_usage(ctx, resp)
        if out.profile not in self.params.profiles:
            ctx.stats["llm_error"] = f"unknown profile {out.profile[:60]!r}"
            return ""
        return out.profile


# --------------------------------------------------------------------------- unified seeds


def redistribute(weights: Mapping[str, float], present: Mapping[str, bool]) -> dict[str, float]:
    """Hand an empty tier's weight to the next non-empty tier (entity -> structural ->
    thematic -> entity). With the reference's case, an empty structural tier's w2 goes to
    the thematic tier. All tiers empty: all zero."""
    eff = {t: float(weights.get(t, 0.0)) if present.get(t) else 0.0 for t in TIERS}
    if not any(present.get(t) for t in TIERS):
        return {t: 0.0 for t in TIERS}
    for i, t in enumerate(TIERS):
        if present.get(t):
            continue
        for step in range(1, len(TIERS)):
            nxt = TIERS[(i + step) % len(TIERS)]
            if present.get(nxt):
                eff[nxt] += float(weights.get(t, 0.0))
                break
    return eff


def unify(
    seeds: Sequence[Seed], weights: Mapping[str, float], arrays: Sequence[SeedArray] = ()
) -> tuple[list[Seed], list[SeedArray]]:
    """route5 §2.4 ``build_unified_seeds``: normalise within each tier, multiply by the
    tier weight, sum per node, normalise to a distribution.

    Each node comes out once, named and tiered after its largest contribution (ties keep
    the earlier tier): as a :class:`Seed` record when that contribution was a record
    (records best first), else in a :class:`SeedArray` of the same tier and strategy as
    the array it came from. The sums run in the order a per-seed loop would add them, so
    arrays and records give the same weights to the bit."""
    records: dict[str, list[Seed]] = defaultdict(list)
    for s in seeds:
        if s.node_id and s.weight > 0:
            records[s.tier].append(s)
    blocks: dict[str, list[SeedArray]] = defaultdict(list)
    for a in arrays:
        seeding = a.positive()
        if len(seeding):
            blocks[a.tier].append(seeding)
    row: dict[str, int] = {}  # node -> row, in the order nodes first contribute
    # one part per tier's records and per array: (rows, contributions, where they came from)
    parts: list[tuple[np.ndarray, np.ndarray, list[Seed] | SeedArray]] = []
    for tier in [*TIERS, *sorted(t for t in {*records, *blocks} if t not in TIERS)]:
        items, tier_arrays = records.get(tier, []), blocks.get(tier, [])
        mass = sum(chain((s.weight for s in items), *(a.weights.tolist() for a in tier_arrays)))
        w = float(weights.get(tier, 0.0))
        if mass <= 0 or w <= 0:
            continue
        if items:
            rows = np.fromiter((row.setdefault(s.node_id or "", len(row)) for s in items), dtype=np.int64, count=len(items))
            parts.append((rows, np.array([w * s.weight / mass for s in items]), items))
        for a in tier_arrays:
            start = len(row)
            if row.keys().isdisjoint(a.node_ids):  # the usual case: new nodes, rows in one go
                row.update(zip(a.node_ids, range(start, start + len(a)), strict=True))
                rows = np.arange(start, start + len(a))
            else:
                rows = np.fromiter((row.setdefault(n, len(row)) for n in a.node_ids), dtype=np.int64, count=len(a))
            parts.append((rows, w * a.weights / mass, a))
    total = np.zeros(len(row))
    best = np.full(len(row), -np.inf)
    winner = np.full(len(row), -1, dtype=np.int64)  # the part of each node's largest contribution
    winner_at = np.zeros(len(row), dtype=np.int64)  # and its place in a records part
    for k, (rows, contrib, source) in enumerate(parts):
        if isinstance(source, SeedArray):  # each node once: add and compare all at once
            total[rows] += contrib
            better = contrib > best[rows]
            best[rows[better]] = contrib[better]
            winner[rows[better]] = k
            continue
        np.add.at(total, rows, contrib)  # unbuffered: a node named twice adds up in order
        for j, (r, c) in enumerate(zip(rows.tolist(), contrib.tolist(), strict=True)):
            if c > best[r]:
                best[r], winner[r], winner_at[r] = c, k, j
    z = sum(total.tolist())
    if z <= 0:
        return [], []
    share = total / z
    nodes = list(row)
    out_records: list[Seed] = []
    out_arrays: list[SeedArray] = []
    for k, (rows, _contrib, source) in enumerate(parts):
        mine = np.flatnonzero(winner == k)
        if not len(mine):
            continue
        if isinstance(source, SeedArray):
            if len(mine) == len(rows):  # it won all its nodes: keep its ids as they are
                out_arrays.append(SeedArray(source.node_ids, share[rows], source.tier, source.strategy))
            else:
                out_arrays.append(SeedArray(tuple(nodes[i] for i in mine.tolist()), share[mine], source.tier, source.strategy))
            continue
        for i in mine.tolist():
            top = source[int(winner_at[i])]
            out_records.append(Seed(top.name, nodes[i], float(share[i]), top.tier, top.strategy))
    out_records.sort(key=lambda s: (-s.weight, s.node_id or ""))
    return out_records, out_arrays


def top_seeds(records: Sequence[Seed], arrays: Sequence[SeedArray], k: int) -> list[Seed]:
    """The ``k`` heaviest seeds of records and arrays together, ties by node id (the trace's "top")."""
    cands = list(records)
    for a in arrays:
        for i in largest(a.weights, np.arange(len(a)), k).tolist():
            cands.append(Seed(a.node_ids[i], a.node_ids[i], float(a.weights[i]), a.tier, a.strategy))
    return sorted(cands, key=lambda s: (-s.weight, s.node_id or ""))[:k]


def chunk_counts(store: GraphStore, group: str, entity_ids: Sequence[str]) -> dict[str, int]:
    """entity id -> chunks that mention it (the entity's ``chunk_count``), for the entities
    that have a positive count."""
    counts: dict[str, int] = {}
    for node in store.get_nodes(group, list(dict.fromkeys(entity_ids))):
        n = node.props.get("chunk_count")
        if isinstance(n, int | float) and not isinstance(n, bool) and n > 0:
            counts[node.id] = int(n)
    return counts


def with_specificity(
    store: GraphStore, group: str, seeds: Sequence[Seed], arrays: Sequence[SeedArray] = ()
) -> tuple[list[Seed], list[SeedArray]]:
    """Entity-tier seeds weighted by node specificity 1 / chunks mentioning the entity
    (HippoRAG, Gutierrez et al. 2024): a seed named in hundreds of passages spreads its
    teleport mass over all of them, so it should carry less of it. Other tiers unchanged."""
    ids = [s.node_id for s in seeds if s.tier == "entity" and s.node_id]
    ids += [n for a in arrays if a.tier == "entity" for n in a.node_ids]
    if not ids:
        return list(seeds), list(arrays)
    counts = chunk_counts(store, group, ids)
    out = [
        replace(s, weight=s.weight / counts.get(s.node_id, 1))
        if s.tier == "entity" and s.node_id else s
        for s in seeds
    ]
    out_arrays = [
        SeedArray(a.node_ids, a.weights / np.array([counts.get(n, 1) for n in a.node_ids], dtype=np.float64), a.tier, a.strategy)
        if a.tier == "entity" else a
        for a in arrays
    ]
    return out, out_arrays


def tier_report(nominal: float, effective: float, records: Sequence[Seed], arrays: Sequence[SeedArray]) -> dict[str, Any]:
    """One tier in unified_seeds' trace: its weights, its first 15 seeds with their share of
    the tier, and how many seeds it had."""
    listed = [(s.name, s.node_id, s.weight) for s in records[:15]]
    for a in arrays:
        listed += [(n, n, w) for n, w in zip(a.node_ids[: 15 - len(listed)], a.weights.tolist(), strict=False)]
    mass = sum(s.weight for s in records) + sum(float(a.weights.sum()) for a in arrays) or 1.0
    return {
        "nominal": round(nominal, 4),
        "effective": round(effective, 4),
        "seeds": [{"name": name, "node": node, "weight": round(w / mass, 4)} for name, node, w in listed],
        "count": len(records) + sum(len(a) for a in arrays),
    }


class UnifiedSeeds(Stage):
    """Merge the three seed tiers into one weighted teleport vector (tier-normalised, weighted, summed)."""

    name = "unified_seeds"
    kind = StageKind.SEED_SOURCE
    consumes = (Slot.SEEDS,)
    reads = (Slot.TIER_WEIGHTS, Slot.DAMPING)
    produces = (Slot.SEEDS, Slot.TIER_WEIGHTS, Slot.DAMPING)

    class Params(StageParams):
        w1: float = Field(0.5, ge=0.0, le=1.0, description="Entity tier weight when no weight_profile ran.")
        w2: float = Field(0.3, ge=0.0, le=1.0, description="Structural tier weight when no weight_profile ran.")
        w3: float = Field(0.2, ge=0.0, le=1.0, description="Thematic tier weight when no weight_profile ran.")
        redistribute: bool = Field(True, description="Hand an empty tier's weight to the next non-empty tier.")
        dynamic_damping: bool = Field(
            True, description="Set damping = 0.70 + 0.20 * effective w1 (unless weight_profile fixed it)."
        )
        w_passage: float = Field(
            0.0, ge=0.0, le=10.0,
            description="Weight of the passage tier (passage_seeds, HippoRAG 2) beside w1 + w2 + w3; it never "
            "receives or hands on redistributed weight and does not change the damping. 0: passage seeds ignored.",
        )
        specificity: bool = Field(
            False,
            description="Divide each entity-tier seed's weight by the number of chunks that mention the entity "
            "(HippoRAG's node specificity), so a rare name in the question outweighs a common one.",
        )

    params: Params

    def run(self, state: QueryState, ctx: StageContext) -> None:
        p = self.params
        seeds, arrays = state.seeds, state.seed_arrays
        if p.specificity:
            seeds, arrays = with_specificity(ctx.services.store, state.group, seeds, arrays)
        nominal_src = state.tier_weights or {"w1": p.w1, "w2": p.w2, "w3": p.w3}
        nominal = {t: float(nominal_src.get(TIER_KEYS[t], 0.0)) for t in TIERS}
        resolved: dict[str, list[Seed]] = defaultdict(list)  # tier -> its seeds with a node
        for s in seeds:
            if s.node_id:
                resolved[s.tier].append(s)
        blocks: dict[str, list[SeedArray]] = defaultdict(list)
        for a in arrays:
            blocks[a.tier].append(a)

        def present(tier: str) -> bool:
            return any(s.weight > 0 for s in resolved[tier]) or any(bool((a.weights > 0).any()) for a in blocks[tier])

        eff = redistribute(nominal, {t: present(t) for t in TIERS}) if p.redistribute else dict(nominal)
        tiers_report = {t: tier_report(nominal[t], eff[t], resolved[t], blocks[t]) for t in TIERS}
        passage_report: dict[str, Any] | None = None  # reported apart: "tiers" stays the reference's three
        if present(PASSAGE_TIER) or p.w_passage:
            passage = [s for s in resolved[PASSAGE_TIER] if s.weight > 0]
            passage_report = tier_report(p.w_passage, p.w_passage if present(PASSAGE_TIER) else 0.0, passage,
                                         [a.positive() for a in blocks[PASSAGE_TIER]])
        state.seeds, state.seed_arrays = unify(seeds, {**eff, PASSAGE_TIER: p.w_passage}, arrays)
        state.tier_weights = {TIER_KEYS[t]: eff[t] for t in TIERS}
        rule = state.damping_rule or DampingRule()
        if p.dynamic_damping and not rule.fixed:
            state.damping = rule.damping(eff["entity"])
        ctx.stats.update(
            {
                "profile": state.profile,
                "tiers": tiers_report,
                **({"passage_tier": passage_report} if passage_report is not None else {}),
                "damping": round(state.damping, 4) if state.damping is not None else None,
                "unified_seeds": state.size(Slot.SEEDS),
                "top": [{"name": s.name, "tier": s.tier, "weight": round(s.weight, 4)} for s in top_seeds(state.seeds, state.seed_arrays, 10)],
            }
        )


@hookimpl
def register_seed_sources() -> list[type[Stage]]:
    return [StructuralSeeds, ThematicSeeds, PassageSeeds, WeightProfile, UnifiedSeeds]
