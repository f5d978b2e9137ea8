"""Blockwise kNN equals a brute-force computation, whatever the block size."""

from __future__ import annotations

import numpy as np
import pytest
from graphroute.core.lib import knn
from graphroute.core.lib.knn import knn_pairs


def brute(vectors: np.ndarray, k: int, threshold: float, keys: list[int]) -> dict[tuple[int, int], float]:
    x = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    sims = x @ x.T
    out: dict[tuple[int, int], float] = {}
    for i in range(len(x)):
        cand = [(sims[i, j], j) for j in range(len(x)) if keys[j] != keys[i]]
        cand.sort(reverse=True)
        for s, j in cand[:k]:
            if s >= threshold:
                out[(min(i, j), max(i, j))] = float(s)
    return out


@pytest.mark.parametrize("block_elements", [7, 64, 10_000_000])
def test_blockwise_matches_brute_force(monkeypatch: pytest.MonkeyPatch, block_elements: int) -> None:
    monkeypatch.setattr(knn, "BLOCK_ELEMENTS", block_elements)
    rng = np.random.default_rng(3)
    base = rng.normal(size=(6, 16))
    vectors = np.repeat(base, 5, axis=0) + 0.3 * rng.normal(size=(30, 16))  # clusters -> high sims
    keys = [int(i) for i in rng.integers(0, 8, size=30)]  # "chunks"
    pairs = knn_pairs(vectors.astype(np.float32), 2, 0.5, exclude=keys)
    expected = brute(vectors, 2, 0.5, keys)
    assert {(p.a, p.b) for p in pairs} == set(expected)
    assert all(abs(p.similarity - expected[(p.a, p.b)]) < 1e-4 for p in pairs)
    assert all(keys[p.a] != keys[p.b] for p in pairs)
    assert len(pairs) <= 2 * 30 and [p.similarity for p in pairs] == sorted((p.similarity for p in pairs), reverse=True)


@pytest.mark.parametrize("grouped", [True, False])
def test_handing_the_matrix_over_gives_the_same_pairs(monkeypatch: pytest.MonkeyPatch, grouped: bool) -> None:
    """``copy=False`` (no second working copy when rows are grouped by key) changes nothing,
    ties included: duplicated rows make many equal similarities."""
    monkeypatch.setattr(knn, "BLOCK_ELEMENTS", 200)
    rng = np.random.default_rng(5)
    base = rng.normal(size=(5, 12)).astype(np.float32)
    vectors = np.repeat(base, 8, axis=0)  # exact duplicates: ties everywhere
    vectors[::3] += 0.05 * rng.normal(size=vectors[::3].shape).astype(np.float32)
    keys = [i // 4 for i in range(40)] if grouped else [(i * 7) % 10 for i in range(40)]
    expected = knn_pairs(vectors.copy(), 2, 0.3, exclude=keys)
    handed = vectors.copy()
    got = knn_pairs(handed, 2, 0.3, exclude=keys, copy=False)
    assert got == expected
    if grouped:  # the handed-over matrix was the working copy (normalised in place)
        assert np.allclose(np.linalg.norm(handed, axis=1), 1.0, atol=1e-5)
    else:
        assert np.array_equal(handed, vectors)
