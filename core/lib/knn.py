"""Blockwise exact top-k cosine neighbours, for kNN edge builders and the threshold sweep.

Why blockwise: 100k sentences would need a 100k x 100k similarity matrix (40 GB of float32).
Rows are processed in blocks sized so one block of similarities stays around 64 MB, and only
each row's top-k survives. Vectors are L2-normalised, so a dot product is the cosine.

``exclude`` assigns each vector a key (e.g. its chunk id); neighbours with the same key are
never chosen (RELATED_TO is cross-chunk only). Self-matches are always excluded.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

# Similarities per block: 4M float32 = 16 MB, plus argpartition's int64 index array of the
# same shape (32 MB). A larger block made the matrix products no faster on 2 cores and put
# ~256 MB on top of the sentence matrix at the peak of every kNN step.
BLOCK_ELEMENTS = 4_000_000


@dataclass(frozen=True)
class Pair:
    """An undirected neighbour pair, stored once: ``a < b`` by position."""

    a: int
    b: int
    similarity: float
    mutual: bool


# rows normalised at a time by normalise_in_place: 8,192 x 384 float32 is 12 MB of scratch
_NORM_ROWS = 8192


def normalise_in_place(m: np.ndarray) -> np.ndarray:
    """Scale the rows of a float32 matrix the caller owns to unit length (zero rows stay).

    A block of rows at a time: ``np.linalg.norm(m, axis=1)`` squares the whole matrix into a
    temporary first, a second copy of it (150 MB at 100k sentences x 384-d) at the moment
    memory peaks. Each row's norm is summed the same way either way, so results are equal."""
    for start in range(0, len(m), _NORM_ROWS):
        part = m[start : start + _NORM_ROWS]
        norms = np.linalg.norm(part, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        part /= norms
    return m


def topk_neighbours(
    vectors: np.ndarray,
    k: int,
    *,
    exclude: Sequence[object] | None = None,
    min_similarity: float = -1.0,
    progress: object | None = None,
    copy: bool = True,
) -> Iterator[tuple[int, np.ndarray, np.ndarray]]:
    """Yield ``(row, neighbour_indexes, similarities)`` for every row, best first, at most k
    neighbours with similarity >= ``min_similarity``.

    ``copy=False`` hands the matrix over: when its rows are already grouped by key (sentence
    ids sort chunk by chunk), it is normalised in place and used as the working matrix
    instead of a second copy (100k sentences x 384-d: 154 MB). Same rows in the same order,
    so the same neighbours, ties included."""
    n = int(vectors.shape[0])
    if n == 0 or k <= 0:
        return
    keys = np.arange(n) if exclude is None else _codes(exclude)
    # rows with the same key form contiguous ranges once sorted: mask them per row cheaply
    order = np.argsort(keys, kind="stable")
    grouped = bool(np.all(keys[1:] >= keys[:-1]))  # then `order` is the identity
    owned = (
        not copy and grouped and isinstance(vectors, np.ndarray) and vectors.dtype == np.float32
        and vectors.flags.c_contiguous and vectors.flags.writeable
    )
    if owned:
        xs = normalise_in_place(vectors)
    else:
        xs = normalise_in_place(np.asarray(vectors, dtype=np.float32)[order])  # the one working copy
    ks = keys[order]
    bounds = np.flatnonzero(np.diff(ks)) + 1
    starts = np.concatenate(([0], bounds))
    ends = np.concatenate((bounds, [n]))
    group_of = np.repeat(np.arange(len(starts)), ends - starts)
    block = max(1, min(n, BLOCK_ELEMENTS // max(n, 1)))
    kk = min(k, n - 1)
    if kk <= 0:
        return
    for i0 in range(0, n, block):
        i1 = min(n, i0 + block)
        sims = xs[i0:i1] @ xs.T
        for r in range(i0, i1):
            g = group_of[r]
            sims[r - i0, starts[g] : ends[g]] = -np.inf  # same key (and self)
        if kk < n:  # the kk largest, without a negated copy of the block
            idx = np.argpartition(sims, n - kk, axis=1)[:, n - kk :]
        else:
            idx = np.tile(np.arange(n), (i1 - i0, 1))
        top = np.take_along_axis(sims, idx, axis=1)
        for r in range(i1 - i0):
            sel = np.argsort(-top[r])
            nb, sv = idx[r][sel], top[r][sel]
            keep = sv >= min_similarity
            yield int(order[i0 + r]), order[nb[keep]], sv[keep].astype(np.float32)
        if progress is not None and hasattr(progress, "advance"):
            progress.advance(i1 - i0)


def _codes(keys: Sequence[object]) -> np.ndarray:
    lookup: dict[object, int] = {}
    return np.fromiter((lookup.setdefault(key, len(lookup)) for key in keys), dtype=np.int64, count=len(keys))


def knn_pairs(
    vectors: np.ndarray,
    k: int,
    threshold: float,
    *,
    exclude: Sequence[object] | None = None,
    progress: object | None = None,
    copy: bool = True,
) -> list[Pair]:
    """Each row chooses its top-k neighbours at or above ``threshold``; the union of the
    choices, one :class:`Pair` per unordered pair, best first. At most ``k * n`` pairs.
    ``copy=False``: the caller hands the matrix over (see :func:`topk_neighbours`)."""
    chosen: dict[tuple[int, int], tuple[float, int]] = {}
    neighbours = topk_neighbours(vectors, k, exclude=exclude, min_similarity=threshold, progress=progress, copy=copy)
    for row, nbs, sims in neighbours:
        for j, s in zip(nbs.tolist(), sims.tolist(), strict=True):
            key = (row, j) if row < j else (j, row)
            prev = chosen.get(key)
            chosen[key] = (max(s, prev[0]), prev[1] + 1) if prev else (s, 1)
    pairs = [Pair(a, b, float(s), mutual=c > 1) for (a, b), (s, c) in chosen.items()]
    pairs.sort(key=lambda p: (-p.similarity, p.a, p.b))
    return pairs


def topk_table(vectors: np.ndarray, k: int, *, exclude: Sequence[object] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Dense ``(n, k)`` neighbour indexes and similarities (``-1`` / ``-inf`` padding): one
    pass that serves every threshold of a sweep, since the top-k at threshold t are the
    overall top-k filtered by t."""
    n = vectors.shape[0]
    idx = np.full((n, k), -1, dtype=np.int64)
    sim = np.full((n, k), -np.inf, dtype=np.float32)
    for row, nbs, sims in topk_neighbours(vectors, k, exclude=exclude):
        idx[row, : len(nbs)] = nbs
        sim[row, : len(sims)] = sims
    return idx, sim
