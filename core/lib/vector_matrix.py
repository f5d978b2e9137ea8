"""One vector space of a group held as a matrix in the client and searched exactly.

The embedded store keeps every space this way. The Neo4j store keeps a space this way only
while the group holds at most ``exact_max`` vectors in it (a few MB): there a scan in the
server, reading each node's vector property and computing its cosine in Cypher, cost ~40-60
ms a search on MuSiQue's 1,890 passages, where the product below takes well under 1 ms.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

import numpy as np
from graphroute.core.lib.knn import normalise_in_place
from graphroute.core.lib.topk import ranked_top


def dot_rows(matrix: np.ndarray, q: np.ndarray) -> np.ndarray:
    """``matrix @ q`` on one thread (numpy's own loop, no BLAS).

    Why: above a few thousand rows OpenBLAS splits a matrix-vector product over its
    threads, and a query arrives after the threads went to sleep: waking them cost ~8 ms
    per search on the shared 2-core machine (3,272 x 384 entity vectors: 7.9 ms with BLAS
    threads, 0.2 ms on one; 20,000 x 384: 7.8 vs 2.4 ms), more than the product itself,
    which is memory-bound anyway. Scores agree with BLAS to float rounding (~1e-7)."""
    return np.einsum("ij,j->i", matrix, q)


@dataclass
class VectorMatrix:
    """One (group, space) matrix: ids sorted, rows of unit length."""

    ids: list[str]
    index: dict[str, int]
    matrix: np.ndarray  # normalised rows, float32
    # the last whole-space search: (query bytes, scores of every row). Stages of one question
    # search the same space with the same vector (Route 5's structural seeds and vector
    # anchors), and the product is the search's whole cost (`timeit` of the einsum: 0.47 ms
    # for MuSiQue's 6,580 sentences, 11.07 ms for 100,000). One tuple, replaced whole, so
    # concurrent searches never see half of one.
    last_scores: tuple[bytes, np.ndarray] | None = None

    @classmethod
    def of(cls, ids: list[str], matrix: np.ndarray) -> VectorMatrix:
        """A matrix whose rows follow ``ids`` (sorted), scaled to unit length in place
        (embedders already do it; a store must not rely on it): the only copy is the one
        kept here."""
        normalise_in_place(matrix)
        return cls(ids, {i: n for n, i in enumerate(ids)}, matrix)

    def scores(self, q: np.ndarray) -> np.ndarray:
        """Cosine of every row with the unit vector ``q`` (the last result reused when ``q``
        is the same, bit for bit)."""
        key = q.tobytes()
        last = self.last_scores
        if last is not None and last[0] == key:
            return last[1]
        scores = dot_rows(self.matrix, q)
        scores.flags.writeable = False  # shared with the next search of the same vector
        self.last_scores = (key, scores)
        return scores

    def search(self, q: np.ndarray, k: int, restrict_to: Collection[str] | None = None) -> list[tuple[str, float]]:
        """The ``k`` rows most similar to the unit vector ``q`` (of ``restrict_to`` only,
        when given), best first, equal scores by id, so the hits do not depend on the write
        order."""
        if k <= 0 or not self.ids:
            return []
        if restrict_to is not None:
            rows = np.fromiter(sorted({self.index[i] for i in restrict_to if i in self.index}), dtype=np.int64)
            if rows.size == 0:
                return []
            scores = dot_rows(self.matrix[rows], q)
        else:
            rows = None
            scores = self.scores(q)
        order = ranked_top(scores, np.arange(scores.shape[0]), k)
        picked = rows[order] if rows is not None else order
        return list(zip([self.ids[r] for r in picked.tolist()], scores[order].tolist(), strict=True))
