"""Skeleton invariants, checked on whatever a store holds for a group."""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

from graphroute.core.api.store import GraphStore

SKELETON_LABELS = {"Document", "Section", "Paragraph", "Sentence", "TextChunk"}
SKELETON_EDGES = {"HAS_SECTION", "SUBSECTION_OF", "PART_OF", "NEXT", "IN_SECTION", "IN_DOCUMENT"}


def check_skeleton(store: GraphStore, group: str) -> dict[str, Any]:
    """Assert the skeleton's invariants (doc ids, PART_OF, NEXT chains, the RELATED_TO budget);
    return a few figures for further assertions."""
    label: dict[str, str] = {}
    chunk_of: dict[str, str] = {}
    for n in store.iter_nodes(group):
        label[n.id] = n.label
        if n.label in SKELETON_LABELS:
            assert n.doc_id, f"{n.label} {n.id} has no doc_id"
        if n.label == "Sentence":
            chunk_of[n.id] = n.props["chunk_id"]
    sentences = [i for i, lb in label.items() if lb == "Sentence"]
    part_of: dict[str, Counter[str]] = defaultdict(Counter)
    nxt_out: Counter[str] = Counter()
    nxt_in: Counter[str] = Counter()
    succ: dict[str, str] = {}
    related = 0
    for e in store.iter_edges(group):
        if e.type in SKELETON_EDGES:
            assert e.doc_id, f"{e.type} {e.src}->{e.dst} has no doc_id"
        if e.type == "PART_OF" and label.get(e.src) == "Sentence":
            part_of[e.src][label[e.dst]] += 1
            if label[e.dst] == "TextChunk":
                assert chunk_of[e.src] == e.dst, "PART_OF chunk disagrees with the chunk_id property"
        elif e.type == "NEXT":
            assert label[e.src] == label[e.dst] == "Sentence"
            assert chunk_of[e.src] == chunk_of[e.dst], f"NEXT {e.src}->{e.dst} crosses chunks"
            nxt_out[e.src] += 1
            nxt_in[e.dst] += 1
            succ[e.src] = e.dst
        elif e.type == "RELATED_TO" and label.get(e.src) == "Sentence":
            related += 1
            assert label[e.dst] == "Sentence"
            assert chunk_of[e.src] != chunk_of[e.dst], f"RELATED_TO {e.src}-{e.dst} links one chunk"
            assert e.src != e.dst
            assert 0.0 < e.props["similarity"] <= 1.0 + 1e-6
    for s in sentences:
        assert part_of[s]["Paragraph"] == 1, f"{s}: {part_of[s]['Paragraph']} PART_OF paragraph edges"
        assert part_of[s]["TextChunk"] == 1, f"{s}: {part_of[s]['TextChunk']} PART_OF chunk edges"
    assert max(nxt_out.values(), default=0) <= 1 and max(nxt_in.values(), default=0) <= 1
    for start in sentences:  # acyclic: every chain ends within the number of sentences
        seen = {start}
        cur = start
        while cur in succ:
            cur = succ[cur]
            assert cur not in seen, f"NEXT cycle through {cur}"
            seen.add(cur)
    assert related <= 2 * len(sentences), "RELATED_TO budget violated"
    return {"sentences": len(sentences), "related_to": related, "next": sum(nxt_out.values())}
