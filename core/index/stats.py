"""Statistics of an indexed group (``graphroute stats``)."""

from __future__ import annotations

from typing import Any

from graphroute.core.api.constants import INDEX_REPORT_META
from graphroute.core.api.store import GraphStore


def group_stats(store: GraphStore, group: str) -> dict[str, Any]:
    """Node counts by label, edge counts by type, vectors by space, and what the index
    steps reported (entities, triples, kNN edges, communities, size distribution, ...)."""
    counts = store.counts(group)
    report = store.get_meta(group, INDEX_REPORT_META) or {}
    sentences = counts.get("nodes", {}).get("Sentence", 0)
    related = counts.get("edges", {}).get("RELATED_TO", 0)
    return {
        "group": group,
        "backend": store.backend,
        "nodes": counts.get("nodes", {}),
        "edges": counts.get("edges", {}),
        "vectors": counts.get("vectors", {}),
        # where the ppr stage's local push runs on this store (docs/pages/scaling.md)
        "ppr_push": "inside the database (graphroute.push)" if store.pushes_in_database() else "from the client",
        "invariants": {
            "related_to_budget": {"related_to": related, "limit": 2 * sentences, "ok": related <= 2 * sentences}
        },
        "index": report,
    }
