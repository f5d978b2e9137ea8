"""The RELATED_TO threshold sweep (``graphroute index --sweep-thresholds``).

The skeleton reference picked 0.90 after sweeping 0.80 ... 0.95 and watching edge count,
density and the cross-document ratio. This recomputes the same figures on *your* corpus
without writing anything: one blockwise top-k pass (the top-k at threshold t are the overall
top-k filtered by t), then each threshold is a filter.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from graphroute.core.api.models import Label, VectorSpace
from graphroute.core.api.store import GraphStore
from graphroute.core.lib.knn import topk_table

THRESHOLDS: tuple[float, ...] = (0.80, 0.85, 0.90, 0.92, 0.95)


def threshold_sweep(
    store: GraphStore,
    group: str,
    thresholds: tuple[float, ...] = THRESHOLDS,
    k: int = 2,
) -> list[dict[str, Any]]:
    """One row per threshold: edges the sentence_knn rule (cross-chunk, top-k, stored once
    per pair) would build, density = edges / sentences, cross_document_ratio, and whether
    the budget ``edges <= 2 x sentences`` holds."""
    ids, matrix = store.all_vectors(group, VectorSpace.SENTENCE.value)
    owners = {n.id: (str(n.props.get("chunk_id") or n.id), n.doc_id) for n in store.iter_nodes(group, Label.SENTENCE.value)}
    keep = [i for i, s in enumerate(ids) if s in owners]
    ids = [ids[i] for i in keep]
    n = len(ids)
    rows: list[dict[str, Any]] = []
    if n == 0:
        return [{"threshold": t, "edges": 0, "density": 0.0, "cross_document_ratio": 0.0, "within_budget": True} for t in thresholds]
    idx, sim = topk_table(matrix[keep], k, exclude=[owners[s][0] for s in ids])
    docs = [owners[s][1] for s in ids]
    for t in thresholds:
        pairs: set[tuple[int, int]] = set()
        for r, c in zip(*np.nonzero(sim >= t), strict=True):
            j = int(idx[r, c])
            pairs.add((min(int(r), j), max(int(r), j)))
        edges = len(pairs)
        cross = sum(1 for a, b in pairs if docs[a] != docs[b])
        rows.append({
            "threshold": t,
            "edges": edges,
            "density": round(edges / n, 4),
            "cross_document_ratio": round(cross / edges, 4) if edges else 0.0,
            "within_budget": edges <= 2 * n,
        })
    return rows
