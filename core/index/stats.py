"""Statistics of an indexed group (``graphroute stats``)."""

from __future__ import annotations

from typing import Any

from graphroute.core.api.constants import FINGERPRINT_META, INDEX_REPORT_META
from graphroute.core.api.store import GraphStore


def unfinished_run(store: GraphStore, group: str) -> str | None:
    """What to tell a user of ``group`` when its last index run has not finished its index
    steps: the run marks the group pending with its first write and clears the mark once
    every step has run, so the mark stays after a run that was interrupted, killed or whose
    step failed (and while a run is going on). None when the group is complete."""
    if not (store.get_meta(group, FINGERPRINT_META) or {}).get("pending"):
        return None
    return (
        f"the last index run into group {group!r} has not finished its index steps (it is still running, "
        "or it was interrupted or a step of it failed): the entity graph, communities and similarity "
        "edges may not cover every document yet; run the same `graphroute index` again to finish them (after an "
        "interrupted `graphroute delete`, the same delete again)"
    )


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
        "index": report,  # of the last run that finished
        "unfinished_run": unfinished_run(store, group) is not None,
    }
