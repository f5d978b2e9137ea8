"""Graph export for algorithms: a group's adjacency as a scipy.sparse matrix.

Graph algorithms (PPR, communities) run in Python on the adjacency a store exports, so they
behave identically on every backend. The export is cached per (store, group, edge types,
weights) with :func:`~graphroute.core.api.store.per_version`, so any write invalidates it.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from graphroute.core.api.store import GraphStore, per_version

if TYPE_CHECKING:  # imported where the matrix is built: a query that needs no graph skips scipy
    import scipy.sparse as sp


@dataclass(frozen=True)
class GraphView:
    """Node ids, their row index, and a symmetric CSR adjacency with summed edge weights."""

    ids: tuple[str, ...]
    index: Mapping[str, int]
    matrix: sp.csr_matrix

    def __len__(self) -> int:
        return len(self.ids)


def adjacency(
    store: GraphStore,
    group: str,
    edge_weights: Mapping[str, float],
    *,
    weight_prop: str | None = None,
) -> GraphView:
    """Export the undirected adjacency of ``group`` restricted to the edge types in
    ``edge_weights`` (type -> multiplier). With ``weight_prop``, an edge's own property
    (e.g. ``similarity``) multiplies its weight. Node order is sorted by id, so the result
    is identical whichever backend produced it."""
    key_weights = tuple(sorted((t, float(w)) for t, w in edge_weights.items() if w))
    return per_version(
        store, group, ("adjacency", key_weights, weight_prop), lambda: _export(store, group, key_weights, weight_prop)
    )


def _export(
    store: GraphStore, group: str, key_weights: tuple[tuple[str, float], ...], weight_prop: str | None
) -> GraphView:
    import scipy.sparse as sp
    types: Collection[str] = [t for t, _ in key_weights]
    weights = dict(key_weights)
    src: list[str] = []
    dst: list[str] = []
    val: list[float] = []
    for e in store.iter_edges(group, types):
        w = weights.get(e.type, 0.0)
        if weight_prop is not None:
            p = e.props.get(weight_prop)
            if isinstance(p, int | float):
                w *= float(p)
        if w <= 0 or e.src == e.dst:
            continue
        src.append(e.src)
        dst.append(e.dst)
        val.append(w)
    ids = tuple(sorted(set(src) | set(dst)))
    index = {n: i for i, n in enumerate(ids)}
    n = len(ids)
    if n:
        rows = np.fromiter((index[s] for s in src), dtype=np.int64, count=len(src))
        cols = np.fromiter((index[d] for d in dst), dtype=np.int64, count=len(dst))
        data = np.asarray(val, dtype=np.float64)
        m = sp.coo_matrix((data, (rows, cols)), shape=(n, n))
        mat = (m + m.T).tocsr()
        mat.sum_duplicates()
    else:
        mat = sp.csr_matrix((0, 0), dtype=np.float64)
    return GraphView(ids, index, mat)
