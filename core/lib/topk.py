"""The k best of a score array without sorting all of it, ties broken by index.

Why one home: the PPR ranks 15 of ~22k nodes and the embedded store's exact vector search
keeps k of every row of a space; both want the same answer a stable sort by descending score
would give (equal scores in index order, so in id order where indices follow sorted ids), at
the cost of one partition. Getting the boundary right is the subtle part: a plain
``argpartition(-scores, k - 1)[:k]`` keeps an arbitrary one of several scores tied at the
k-th place.
"""

from __future__ import annotations

import numpy as np


def largest(scores: np.ndarray, candidates: np.ndarray, k: int) -> np.ndarray:
    """The ``candidates`` (indices into ``scores``) whose score is among their ``k`` largest,
    ties at the boundary included, in no particular order: one partition, no sort. No
    candidate for ``k <= 0``."""
    if k <= 0:
        return candidates[:0]
    if len(candidates) <= k:
        return candidates
    kth = np.partition(scores[candidates], len(candidates) - k)[len(candidates) - k]
    return candidates[scores[candidates] >= kth]


def ranked_top(scores: np.ndarray, candidates: np.ndarray, k: int) -> np.ndarray:
    """The ``k`` best ``candidates`` best first, equal scores by index: what
    ``sorted(candidates, key=lambda i: (-scores[i], i))[:k]`` returns."""
    cand = largest(scores, candidates, k)
    return cand[np.lexsort((cand, -scores[cand]))][:k]
