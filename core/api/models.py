"""Data models shared by every part of graphroute.

Two families live here, and nowhere else:

* **Index records** (`Node`, `Edge`) are what stores persist. They are deliberately generic
  (a label plus a property dict) so one store protocol serves every node type; the
  constants in `Label` and `EdgeType` name the types the built-in plugins write.
* **Query records** (`Evidence`, `Seed`, `SeedArray`, `Citation`, `StageTrace`,
  `QueryResult`) are what stages exchange at query time and what `graphroute query --json`
  prints. All are pydantic models but `Seed` and `SeedArray`: a question makes thousands of
  seeds (see their docstrings).
"""

from __future__ import annotations

import copy
import hashlib
from dataclasses import dataclass
from enum import StrEnum
from itertools import compress
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field


class Label(StrEnum):
    """Node labels written by the built-in index pipeline."""

    DOCUMENT = "Document"
    SECTION = "Section"
    PARAGRAPH = "Paragraph"
    SENTENCE = "Sentence"
    CHUNK = "TextChunk"
    ENTITY = "Entity"
    COMMUNITY = "Community"


class EdgeType(StrEnum):
    """Edge types. Deterministic ones come from parsing only, probabilistic ones from
    embeddings only (see docs/concepts.md); the two are never mixed."""

    # deterministic (parsing)
    HAS_SECTION = "HAS_SECTION"  # Document -> Section (top level)
    SUBSECTION_OF = "SUBSECTION_OF"  # Section -> parent Section
    PART_OF = "PART_OF"  # Sentence -> Paragraph, Sentence -> TextChunk, Paragraph -> Section/TextChunk
    NEXT = "NEXT"  # Sentence -> next Sentence in reading order, within one chunk
    IN_SECTION = "IN_SECTION"  # TextChunk -> Section
    IN_DOCUMENT = "IN_DOCUMENT"  # TextChunk/Section -> Document
    MENTIONS = "MENTIONS"  # TextChunk/Sentence -> Entity
    # probabilistic (embeddings)
    RELATED_TO = "RELATED_TO"  # Sentence <-> Sentence kNN, cross-chunk
    SEMANTICALLY_SIMILAR = "SEMANTICALLY_SIMILAR"  # Section<->Section, Entity<->Entity kNN
    # entity graph
    RELATION = "RELATION"  # Entity -> Entity from an OpenIE triple (property `relation`)
    CO_OCCURS = "CO_OCCURS"  # Entity <-> Entity in one chunk, when no triples exist
    HAS_HUB_ENTITY = "HAS_HUB_ENTITY"  # Section -> hub Entity
    SHARES_ENTITY = "SHARES_ENTITY"  # Section <-> Section in different documents sharing a hub
    OWN_PAGE = "OWN_PAGE"  # TextChunk -> Entity its document's title names (the entity's own page)
    BELONGS_TO = "BELONGS_TO"  # Entity -> Community


class VectorSpace(StrEnum):
    """Named embedding spaces a store keeps; each has one dimension per group."""

    SENTENCE = "sentence"
    CHUNK = "chunk"
    SECTION = "section"
    ENTITY = "entity"
    COMMUNITY = "community"


class Node(BaseModel):
    """One node of a group's index.

    `doc_id` names the document that owns the node (None for cross-document nodes such as
    entities and communities); removing or re-indexing a document deletes exactly the nodes
    and edges it owns.
    """

    model_config = ConfigDict(frozen=False)

    id: str
    label: str
    group: str
    doc_id: str | None = None
    props: dict[str, Any] = Field(default_factory=dict)


class Edge(BaseModel):
    """A typed, directed edge. Symmetric relations (RELATED_TO, SEMANTICALLY_SIMILAR) are
    stored once; graph export treats them as undirected."""

    src: str
    dst: str
    type: str
    group: str
    doc_id: str | None = None
    props: dict[str, Any] = Field(default_factory=dict)


def content_hash(text: str) -> str:
    """Stable content hash used for document change detection, caches and md5 dedup."""
    return hashlib.md5(text.encode("utf-8"), usedforsecurity=False).hexdigest()


# --------------------------------------------------------------------------- query side


class Box(BaseModel):
    """Where a line of cited text sits on its page: PDF points, origin at the top-left corner
    of the page, y downwards (see :mod:`graphroute.core.lib.layout`)."""

    page: int
    x0: float
    top: float
    x1: float
    bottom: float


class Evidence(BaseModel):
    """A scored piece of text a route may show the synthesizer.

    `id` is the store node id (a sentence, paragraph or chunk); `kind` says which. Metadata
    stays here and never inside `text`: context assembly must not leak annotations such as
    `[paragraph, sim=0.75]` into the prompt or the answer.
    """

    id: str
    text: str
    score: float = 0.0
    kind: str = "chunk"
    document: str = ""  # document title
    document_id: str = ""
    section_path: str = ""
    source: str = ""  # which stage produced it, e.g. "ppr", "sentence_search"
    page: int | None = None
    boxes: list[Box] = Field(default_factory=list)  # one per line, for text from a laid-out page (PDF)
    char_offset: int | None = None
    char_length: int | None = None
    chunk_id: str | None = None
    entity: str | None = None  # the entity whose chunks brought this in (Route 2)
    metadata: dict[str, Any] = Field(default_factory=dict)

    def detached(self) -> Evidence:
        """A copy a stage may change without touching this one. Every field but ``metadata``
        is immutable, so only that is copied deeply: ``model_copy(deep=True)`` also copied the
        text, ~0.1 ms per chunk on a hot path."""
        return self.model_copy(update={"metadata": copy.deepcopy(self.metadata)})


@dataclass(slots=True)
class Seed:
    """A query-time seed: a name from the query, resolved to a node when possible.

    A slotted dataclass where the other query records are pydantic models: Route 5 makes
    ~2,000 seeds a question (the passage tier's 1,000 dense hits, then their union), and
    pydantic's validator cost three to four times a dataclass's ``__init__`` for each
    (1,110 seeds: 1.38-2.93 ms against 0.41). Seeds stay inside
    the process (the trace reports them as plain dicts), so nothing needs their schema;
    change one with :func:`dataclasses.replace`."""

    name: str
    node_id: str | None = None
    weight: float = 1.0
    tier: str = "entity"  # entity | structural | thematic
    strategy: str | None = None  # which resolution strategy matched (exact, alias, fuzzy, ...)


@dataclass(frozen=True, slots=True, eq=False)
class SeedArray:
    """Many seeds of one tier at once: node ids and their weights, side by side.

    Why a second shape beside :class:`Seed`: Route 5's passage tier hands PPR the ~1,000
    chunks a dense search scored, and as records they cost more than the search itself -
    made, unified and read back one Python object at a time. As arrays those steps are a few vector operations. A stage that
    makes a handful of named seeds keeps making :class:`Seed` records; stages that read seeds
    read both ``QueryState.seeds`` and ``QueryState.seed_arrays`` (or
    ``QueryState.all_seeds()``, which turns the arrays into records).

    Each node appears once (its seed name is its node id) and the order carries no meaning.
    Immutable - the weights are a read-only copy - so a forked branch state shares the array
    instead of copying it."""

    node_ids: tuple[str, ...]
    weights: np.ndarray  # float64, one per node id
    tier: str
    strategy: str | None = None

    def __post_init__(self) -> None:
        ids = tuple(self.node_ids)
        weights = np.array(self.weights, dtype=np.float64)
        if weights.shape != (len(ids),):
            raise ValueError(f"SeedArray: {len(ids)} node ids but weights of shape {weights.shape}")
        if len(set(ids)) != len(ids):
            raise ValueError("SeedArray: a node id appears twice; give each node one weight")
        weights.flags.writeable = False
        object.__setattr__(self, "node_ids", ids)
        object.__setattr__(self, "weights", weights)

    def __len__(self) -> int:
        return len(self.node_ids)

    def __deepcopy__(self, memo: dict[int, Any]) -> SeedArray:
        return self  # immutable: a deep copy may share it

    def positive(self) -> SeedArray:
        """The seeds with a weight above zero (this array itself when that is all of them):
        a seed of weight zero seeds nothing."""
        keep = self.weights > 0
        if keep.all():
            return self
        return SeedArray(tuple(compress(self.node_ids, keep)), self.weights[keep], self.tier, self.strategy)

    def records(self) -> list[Seed]:
        """The same seeds as :class:`Seed` records."""
        return [Seed(n, n, w, self.tier, self.strategy) for n, w in zip(self.node_ids, self.weights.tolist(), strict=True)]


class ScoredNode(BaseModel):
    """A ranked node, e.g. an entity after PPR."""

    id: str
    name: str = ""
    score: float
    label: str = Label.ENTITY
    community: int | None = None


class Citation(BaseModel):
    """Where a statement of the answer comes from, down to the sentence when known."""

    index: int  # the [n] marker in the answer
    evidence_id: str
    document: str
    document_id: str = ""
    section_path: str = ""
    page: int | None = None
    boxes: list[Box] = Field(default_factory=list)  # the cited text's lines on the page (PDF)
    char_offset: int | None = None
    char_length: int | None = None
    text: str = ""


class StageTrace(BaseModel):
    """What one stage did: the predecessor's `retrieval_stats`, per stage."""

    stage: str  # the stage id in the route
    use: str  # the registered stage name
    kind: str
    enabled: bool = True
    duration_ms: float = 0.0
    items_in: int = 0
    items_out: int = 0
    tokens: dict[str, int] = Field(default_factory=dict)
    stats: dict[str, Any] = Field(default_factory=dict)


class QueryResult(BaseModel):
    """Everything a query returns; benchmarks read only this."""

    question: str
    route: str
    group: str
    answer: str
    negative: bool = False  # True when the route answered "not found"
    citations: list[Citation] = Field(default_factory=list)
    evidence: list[Evidence] = Field(default_factory=list)
    context: str = ""  # exactly the text the synthesizer was given
    trace: list[StageTrace] = Field(default_factory=list)
    duration_ms: float = 0.0
    # Document ids of the route's ranked evidence (before context truncation), in rank
    # order, deduplicated; evidence without a document id contributes its own id.
    # Benchmarks compute passage recall@k from it (``evidence`` holds only what fit the
    # context).
    ranking: list[str] = Field(default_factory=list)

    def to_public_json(self) -> dict[str, Any]:
        """The stable `query --json` / HTTP shape."""
        return {
            "question": self.question,
            "route": self.route,
            "group": self.group,
            "answer": self.answer,
            "negative": self.negative,
            "citations": [c.model_dump() for c in self.citations],
            "evidence": [
                {
                    "id": e.id,
                    "text": e.text,
                    "score": e.score,
                    "document": e.document,
                    "section_path": e.section_path,
                    "source": e.source,
                    "kind": e.kind,
                    "page": e.page,
                    "boxes": [b.model_dump() for b in e.boxes],
                    "char_offset": e.char_offset,
                    "char_length": e.char_length,
                }
                for e in self.evidence
            ],
            "trace": [
                {
                    "stage": t.stage,
                    "use": t.use,
                    "kind": t.kind,
                    "enabled": t.enabled,
                    "duration_ms": round(t.duration_ms, 3),
                    "items_in": t.items_in,
                    "items_out": t.items_out,
                    "tokens": t.tokens,
                    "stats": t.stats,
                }
                for t in self.trace
            ],
            "duration_ms": round(self.duration_ms, 3),
        }
