"""A small skeleton corpus written by hand into a real embedded store.

The nodes follow the index conventions of core/skeleton.py (Document > Section > Paragraph >
Sentence, section-bounded TextChunks, NEXT only inside a chunk, sentence offsets inside the
paragraph and inside the chunk). Vectors come from the real packaged embedder, so vector
search and query embedding are the real thing; RELATED_TO edges are placed by hand so
each test knows exactly which links exist.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest
from graphroute.core.api.models import Edge, EdgeType, Evidence, Label, Node, VectorSpace
from graphroute.core.api.stage import QueryState, Stage, StageContext
from graphroute.core.api.store import GraphStore
from graphroute.core.config.settings import Settings
from graphroute.core.engine import open_store
from graphroute.core.query.services import Services
from graphroute.core.registry import get_registry

GROUP = "skel"

# doc id -> (title, chunks); a chunk is a list of paragraphs; a paragraph a list of sentences
CORPUS: dict[str, tuple[str, list[list[list[str]]]]] = {
    "travel": (
        "Travel Policy",
        [
            [  # chunk travel:chk0
                [
                    "Employees must book all flights through the corporate travel portal.",
                    "Managers approve travel requests within five working days.",
                ],
                ["Hotel costs are capped at 150 euros per night in every city."],
            ],
            [  # chunk travel:chk1
                ["Receipts must be submitted within thirty days of the trip."],
                [
                    "Late receipts need a signature from a director.",
                    "Lost receipts are replaced by a signed declaration.",
                    "The finance team audits declarations every quarter.",
                ],
            ],
        ],
    ),
    "security": (
        "Security Handbook",
        [
            [  # chunk security:chk0
                [
                    "Visitors must wear a badge at all times inside the building.",
                    "Badges are returned to reception when the visitor leaves.",
                ],
                ["Laptops are locked with a cable when left unattended in the office for any reason."],
            ],
        ],
    ),
}
LOW_CONFIDENCE = {"security:sen1": 0.3}


@dataclass
class Corpus:
    store: GraphStore
    group: str
    services: Services
    nodes: dict[str, Node] = field(default_factory=dict)
    chunk_text: dict[str, str] = field(default_factory=dict)

    def ctx(self, stage_id: str = "test") -> StageContext:
        return StageContext(services=self.services, stage_id=stage_id)

    def run(self, stage: Stage, evidence: list[Evidence] | None = None, question: str = "q") -> tuple[QueryState, StageContext]:
        state = QueryState(question=question, group=self.group, evidence=list(evidence or []))
        ctx = self.ctx(stage.name)
        stage.run(state, ctx)
        return state, ctx

    def sentence(self, sid: str) -> Node:
        return self.nodes[sid]


def build_nodes(group: str) -> tuple[list[Node], list[Edge], dict[str, str]]:
    nodes: list[Node] = []
    edges: list[Edge] = []
    chunk_texts: dict[str, str] = {}
    for doc_id, (title, chunks) in CORPUS.items():
        sec_id = f"{doc_id}:sec0"
        nodes.append(Node(id=doc_id, label=Label.DOCUMENT, group=group, doc_id=doc_id, props={"title": title}))
        nodes.append(Node(id=sec_id, label=Label.SECTION, group=group, doc_id=doc_id, props={"title": title, "section_path": title, "level": 0}))
        edges.append(Edge(src=doc_id, dst=sec_id, type=EdgeType.HAS_SECTION, group=group, doc_id=doc_id))
        sen_no = par_no = 0
        for ci, paragraphs in enumerate(chunks):
            chunk_id = f"{doc_id}:chk{ci}"
            par_texts = [" ".join(p) for p in paragraphs]
            chunk_text = "\n\n".join(par_texts)
            chunk_texts[chunk_id] = chunk_text
            ids: list[str] = []
            offset = 0
            for sentences, ptext in zip(paragraphs, par_texts, strict=True):
                par_id = f"{doc_id}:par{par_no}"
                par_no += 1
                nodes.append(Node(id=par_id, label=Label.PARAGRAPH, group=group, doc_id=doc_id, props={
                    "text": ptext, "section_path": title, "chunk_id": chunk_id, "document": title,
                    "chunk_char_offset": offset, "page": ci + 1,
                }))
                edges.append(Edge(src=par_id, dst=chunk_id, type=EdgeType.PART_OF, group=group, doc_id=doc_id))
                pos = 0
                for stext in sentences:
                    sid = f"{doc_id}:sen{sen_no}"
                    sen_no += 1
                    start = ptext.index(stext, pos)
                    pos = start + len(stext)
                    nodes.append(Node(id=sid, label=Label.SENTENCE, group=group, doc_id=doc_id, props={
                        "text": stext, "source": "paragraph", "page": ci + 1,
                        "char_offset": start, "char_length": len(stext), "chunk_char_offset": offset + start,
                        "section_path": title, "section_id": sec_id, "parent_paragraph_id": par_id,
                        "parent_paragraph_text": ptext, "chunk_id": chunk_id, "document": title,
                        "confidence": LOW_CONFIDENCE.get(sid, 1.0), "position": sen_no - 1,
                    }))
                    edges.append(Edge(src=sid, dst=par_id, type=EdgeType.PART_OF, group=group, doc_id=doc_id))
                    edges.append(Edge(src=sid, dst=chunk_id, type=EdgeType.PART_OF, group=group, doc_id=doc_id))
                    ids.append(sid)
                offset += len(ptext) + 2
            # prev/next and NEXT only inside the chunk
            by_id = {n.id: n for n in nodes}
            for j, sid in enumerate(ids):
                by_id[sid].props["prev_sentence_id"] = ids[j - 1] if j > 0 else None
                by_id[sid].props["next_sentence_id"] = ids[j + 1] if j + 1 < len(ids) else None
                if j > 0:
                    edges.append(Edge(src=ids[j - 1], dst=sid, type=EdgeType.NEXT, group=group, doc_id=doc_id))
            nodes.append(Node(id=chunk_id, label=Label.CHUNK, group=group, doc_id=doc_id, props={
                "text": chunk_text, "section_path": title, "section_id": sec_id, "index": ci,
                "document": title, "page": ci + 1,
            }))
            edges.append(Edge(src=chunk_id, dst=sec_id, type=EdgeType.IN_SECTION, group=group, doc_id=doc_id))
            edges.append(Edge(src=chunk_id, dst=doc_id, type=EdgeType.IN_DOCUMENT, group=group, doc_id=doc_id))
    return nodes, edges, chunk_texts


# RELATED_TO edges placed by hand: (src, dst, similarity). Stored once, read both ways.
RELATED: list[tuple[str, str, float]] = [
    ("travel:sen3", "travel:sen5", 0.93),  # receipts <-> lost receipts (other chunk, same doc)
    ("travel:sen4", "security:sen1", 0.91),  # signature <-> badges (cross-document)
]


@pytest.fixture(scope="session")
def embedder() -> Any:
    return get_registry().embedders.get("local")()


@pytest.fixture(scope="session")
def corpus(tmp_path_factory: pytest.TempPathFactory, embedder: Any) -> Iterator[Corpus]:
    store = open_store(str(tmp_path_factory.mktemp("skeleton-store")), settings=Settings())
    nodes, edges, chunk_texts = build_nodes(GROUP)
    edges += [
        Edge(src=a, dst=b, type=EdgeType.RELATED_TO, group=GROUP, props={"similarity": s}) for a, b, s in RELATED
    ]
    sentences = [n for n in nodes if n.label == Label.SENTENCE]
    chunks = [n for n in nodes if n.label == Label.CHUNK]
    vectors = {
        VectorSpace.SENTENCE.value: ([n.id for n in sentences], embedder.embed([n.props["text"] for n in sentences])),
        VectorSpace.CHUNK.value: ([n.id for n in chunks], embedder.embed([n.props["text"] for n in chunks])),
    }
    store.write(GROUP, nodes, edges, vectors)
    services = Services(store, GROUP, embedder=embedder)
    yield Corpus(store, GROUP, services, {n.id: n for n in nodes}, chunk_texts)
    store.close()


@pytest.fixture
def cosine(embedder: Any) -> Any:
    def f(a: str, b: str) -> float:
        va, vb = embedder.embed([a]), embedder.embed([b])
        return float(np.dot(va[0], vb[0]))

    return f
