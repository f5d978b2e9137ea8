"""The k best of a score array: the answer a stable sort by descending score gives."""

from __future__ import annotations

import numpy as np
from graphroute.core.lib.topk import largest, ranked_top


def test_the_k_best_are_a_stable_sorts_with_ties_at_the_boundary_kept() -> None:
    rng = np.random.default_rng(3)
    scores = rng.integers(0, 6, 40).astype(np.float64)  # many ties
    candidates = np.flatnonzero(rng.random(40) < 0.7)
    ordered = sorted(candidates.tolist(), key=lambda i: (-scores[i], i))
    for k in range(-1, len(candidates) + 2):
        assert ranked_top(scores, candidates, k).tolist() == ordered[: max(k, 0)]
        got = set(largest(scores, candidates, k).tolist())
        if k <= 0:
            assert not got
            continue
        floor = scores[ordered[min(k, len(ordered)) - 1]]
        assert got == {i for i in ordered if scores[i] >= floor}  # every tie of the k-th kept
