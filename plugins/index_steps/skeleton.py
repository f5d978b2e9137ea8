"""Probabilistic skeleton edges: sparse sentence kNN (RELATED_TO) and section similarity.

These are the only skeleton edges that come from embeddings (skeleton reference, "KNN Edge
Taxonomy", B): each sentence links to at most ``k`` sentences of *other* chunks whose cosine
is at least ``threshold`` (0.90, k 2). A strict threshold keeps the graph sparse and the
links meaningful (paraphrases, cross-document references to one fact); the budget invariant
``RELATED_TO <= 2 x sentences`` is enforced and reported. Both steps rebuild their edges for
the whole group whenever anything changed, because a new document can become the nearest
neighbour of any old sentence.
"""

from __future__ import annotations

from typing import Any

from graphroute.core.api.components import ComponentParams, IndexContext, IndexStep
from graphroute.core.api.models import Edge, EdgeType, Label, VectorSpace
from graphroute.core.hookspecs import hookimpl
from graphroute.core.lib.knn import knn_pairs
from graphroute.core.lib.phases import enter_phase
from graphroute.core.lib.progress import bar
from pydantic import Field

SOURCE_KNN_SENTENCE = "knn_sentence"
BUDGET_FACTOR = 2  # RELATED_TO <= 2 x sentences (skeleton reference, "edge budget")


def sentence_chunks(ctx_store: Any, group: str) -> dict[str, tuple[str, str | None]]:
    """sentence id -> (chunk id, doc id), from the Sentence nodes."""
    out: dict[str, tuple[str, str | None]] = {}
    for n in ctx_store.iter_nodes(group, Label.SENTENCE.value):
        out[n.id] = (str(n.props.get("chunk_id") or n.id), n.doc_id)
    return out


class SentenceKnn(IndexStep):
    """RELATED_TO: sparse cross-chunk sentence kNN (cosine >= 0.90, k 2); budget <= 2 x sentences."""

    name = "sentence_knn"

    class Params(ComponentParams):
        threshold: float = Field(0.90, ge=0.0, le=1.0, description="minimum cosine for a RELATED_TO edge")
        k: int = Field(2, ge=1, le=10, description="neighbours each sentence may choose (other chunks only)")

    params: Params

    def run(self, ctx: IndexContext) -> dict[str, Any]:
        store, group = ctx.store, ctx.group
        enter_phase("step:sentence_knn:vectors")
        ids, matrix = store.all_vectors(group, VectorSpace.SENTENCE.value)
        owners = sentence_chunks(store, group)
        keep = [i for i, sid in enumerate(ids) if sid in owners]
        if len(keep) < len(ids):  # (a full-size copy of the matrix only when rows drop out)
            ids = [ids[i] for i in keep]
            matrix = matrix[keep] if len(keep) else matrix[:0]
        n = len(ids)
        chunk_of = [owners[s][0] for s in ids]
        enter_phase("step:sentence_knn:knn")
        with bar("edges: sentence kNN", n) as b:
            # the step owns the matrix it read: no second copy of it inside the kNN
            pairs = knn_pairs(matrix, self.params.k, self.params.threshold, exclude=chunk_of, progress=b, copy=False)
        del matrix
        enter_phase("step:sentence_knn:write")
        budget = BUDGET_FACTOR * n
        trimmed = max(0, len(pairs) - budget)
        pairs = pairs[:budget]  # best first: trimming keeps the strongest links
        edges: list[Edge] = []
        cross_doc = 0
        for p in pairs:
            a, b2 = ids[p.a], ids[p.b]
            crosses = owners[a][1] != owners[b2][1]
            cross_doc += crosses
            edges.append(Edge(
                src=a, dst=b2, type=EdgeType.RELATED_TO.value, group=group, doc_id=None,
                props={
                    "similarity": round(p.similarity, 6), "source": SOURCE_KNN_SENTENCE,
                    "method": SOURCE_KNN_SENTENCE, "mutual": p.mutual, "cross_document": crosses,
                },
            ))
        store.delete_derived(group, edge_types=[EdgeType.RELATED_TO.value], edge_src_label=Label.SENTENCE.value)
        if edges:
            store.write(group, edges=edges)
        return {
            "sentences": n,
            "edges": len(edges),
            "density": round(len(edges) / n, 4) if n else 0.0,
            "cross_document_ratio": round(cross_doc / len(edges), 4) if edges else 0.0,
            "budget": budget,
            "within_budget": len(edges) <= budget,
            "trimmed_to_budget": trimmed,
            "threshold": self.params.threshold,
            "k": self.params.k,
        }


class SectionSimilarity(IndexStep):
    """SEMANTICALLY_SIMILAR between sections (cosine >= 0.43, max 5 per section)."""

    name = "section_similarity"

    class Params(ComponentParams):
        threshold: float = Field(0.43, ge=0.0, le=1.0, description="minimum cosine between section vectors")
        max_edges: int = Field(5, ge=1, le=50, description="neighbours each section may choose")
        cross_document_only: bool = Field(False, description="only link sections of different documents")

    params: Params

    def run(self, ctx: IndexContext) -> dict[str, Any]:
        store, group = ctx.store, ctx.group
        ids, matrix = store.all_vectors(group, VectorSpace.SECTION.value)
        doc_of: dict[str, str | None] = {n.id: n.doc_id for n in store.iter_nodes(group, Label.SECTION.value)}
        keep = [i for i, sid in enumerate(ids) if sid in doc_of]
        ids = [ids[i] for i in keep]
        matrix = matrix[keep] if len(keep) else matrix[:0]
        exclude = [doc_of[s] for s in ids] if self.params.cross_document_only else None
        with bar("edges: section similarity", len(ids)) as b:
            pairs = knn_pairs(matrix, self.params.max_edges, self.params.threshold, exclude=exclude, progress=b)
        edges = [
            Edge(
                src=ids[p.a], dst=ids[p.b], type=EdgeType.SEMANTICALLY_SIMILAR.value, group=group, doc_id=None,
                props={"similarity": round(p.similarity, 6), "source": "section_similarity", "method": "section_similarity"},
            )
            for p in pairs
        ]
        store.delete_derived(group, edge_types=[EdgeType.SEMANTICALLY_SIMILAR.value], edge_src_label=Label.SECTION.value)
        if edges:
            store.write(group, edges=edges)
        cross = sum(1 for e in edges if doc_of[e.src] != doc_of[e.dst])
        return {
            "sections": len(ids),
            "edges": len(edges),
            "cross_document_ratio": round(cross / len(edges), 4) if edges else 0.0,
            "threshold": self.params.threshold,
            "max_edges": self.params.max_edges,
        }


@hookimpl
def register_index_steps() -> list[type[IndexStep]]:
    return [SentenceKnn, SectionSimilarity]
