"""Which TextChunks mention an entity, read from the store for the entities a question
keeps, a bounded slice per entity (``GraphStore.neighbours``), instead of an export of the
group's MENTIONS edges held per store version.

Reading order is ``(document id, the chunk's index, chunk id)`` (:func:`chunk_order`). A hub entity is mentioned by
thousands of chunks and a question keeps a dozen of them: every document holds at least one
of its chunks, so its first ``n`` chunks in reading order lie in its first ``n`` documents
by id, and only those chunks are read (the store orders and cuts them).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from graphroute.core.api.models import EdgeType, Label, Node
from graphroute.core.api.store import GraphStore

Row = tuple[str, str | None]  # (chunk id, its document id)


def chunk_order(node: Node) -> tuple[Any, ...]:
    """A chunk's place in reading order: its document, its index in it (the first of the
    props a loader may set), its id."""
    props = node.props
    for key in ("index", "order", "position", "chunk_index"):
        v = props.get(key)
        if isinstance(v, int | float):
            return (node.doc_id or "", float(v), node.id)
    return (node.doc_id or "", 0.0, node.id)


def mention_rows(
    store: GraphStore, group: str, entity_ids: Iterable[str], *, first_docs: int | None = None
) -> dict[str, list[Row]]:
    """entity id -> (chunk, document) of the TextChunks that MENTION it (sentence mentions
    left out); with ``first_docs``, only the chunks of its first ``first_docs`` documents."""
    ids = list(dict.fromkeys(entity_ids))
    nb = store.neighbours(group, ids, [EdgeType.MENTIONS], other_labels=[Label.CHUNK], first_docs=first_docs)
    out: dict[str, list[Row]] = {e: [] for e in ids}
    seen: set[tuple[str, str]] = set()
    for e, c, d in zip(nb.node, nb.other, nb.other_doc, strict=True):
        if (e, c) not in seen:  # an edge in each direction is still one mention
            seen.add((e, c))
            out[e].append((c, d))
    return out


def _first_documents(rows: Sequence[Row], n: int) -> list[Row]:
    """The rows of the first ``n`` documents (by id): where the first ``n`` in reading order lie."""
    docs = set(sorted({d or "" for _, d in rows})[:n])
    return [r for r in rows if (r[1] or "") in docs]


def chunks_in_order(
    store: GraphStore,
    group: str,
    entity_ids: Sequence[str],
    limit: int,
    mass: Mapping[str, float] | None = None,
) -> tuple[dict[str, list[str]], dict[str, Node]]:
    """entity id -> its first ``limit`` mentioning chunks, in reading order or, with ``mass``,
    by descending mass then reading order; and the chunk nodes read on the way (a superset of
    the kept ones, so callers need not read them again)."""
    if not mass:
        rows = mention_rows(store, group, entity_ids, first_docs=limit)
        cands = {e: rs for e, rs in rows.items()}
    else:
        rows = mention_rows(store, group, entity_ids)
        cands = {}
        for e, rs in rows.items():
            ranked = sorted(rs, key=lambda r: -mass.get(r[0], 0.0))
            if len(ranked) > limit:
                kth = mass.get(ranked[limit - 1][0], 0.0)
                above = [r for r in ranked if mass.get(r[0], 0.0) > kth]
                tied = [r for r in ranked if mass.get(r[0], 0.0) == kth]
                ranked = above + _first_documents(tied, limit - len(above))
            cands[e] = ranked
    nodes = {n.id: n for n in store.get_nodes(group, list(dict.fromkeys(c for rs in cands.values() for c, _ in rs)))}
    m = mass or {}
    out: dict[str, list[str]] = defaultdict(list)
    for e, rs in cands.items():
        found = [nodes[c] for c, _ in rs if c in nodes]
        found.sort(key=lambda nd: (-m.get(nd.id, 0.0), chunk_order(nd)))
        out[e] = [nd.id for nd in found[:limit]]
    return dict(out), nodes
