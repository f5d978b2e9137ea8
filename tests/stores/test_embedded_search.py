"""The embedded store's exact vector search orders equal scores by id.

Route 5's passage tier takes 1,000 chunk hits and min-max scales them; duplicated passages
(the same text in two documents) score exactly alike, and which of them comes first must not
depend on the order the vectors were written in or on how the top k was partitioned.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from graphroute.core.engine import open_store
from graphroute.core.models import Label, Node, VectorSpace
from graphroute.core.settings import Settings

GROUP = "ties"


def test_equal_scores_rank_by_id_whatever_the_write_order(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    distinct = rng.normal(size=(40, 8)).astype(np.float32)
    # every vector three times, under ids written in a shuffled order
    ids = [f"c{n:03d}" for n in range(120)]
    vectors = np.repeat(distinct, 3, axis=0)
    order = rng.permutation(len(ids))
    store = open_store(str(tmp_path / "store"), settings=Settings())
    store.write(
        GROUP,
        [Node(id=ids[i], label=Label.CHUNK, group=GROUP) for i in order],
        vectors={VectorSpace.CHUNK: ([ids[i] for i in order], vectors[order])},
    )
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    for k in (1, 5, 31, 120, 500):
        q = rng.normal(size=8).astype(np.float32)
        got = store.vector_search(GROUP, VectorSpace.CHUNK, q, k)
        scores = unit @ (q / np.linalg.norm(q))
        expect = sorted(range(len(ids)), key=lambda j: (-float(scores[j]), ids[j]))[:k]
        assert [i for i, _ in got] == [ids[j] for j in expect]
        np.testing.assert_allclose([s for _, s in got], scores[expect], atol=1e-5)
        assert all(isinstance(s, float) for _, s in got)
    # restricted to a subset: the same order among the allowed ids
    allowed = ids[5::4]
    q = vectors[7]
    got = store.vector_search(GROUP, VectorSpace.CHUNK, q, 6, restrict_to=allowed)
    scores = unit @ (q / np.linalg.norm(q))
    expect = sorted((ids.index(a) for a in allowed), key=lambda j: (-float(scores[j]), ids[j]))[:6]
    assert [i for i, _ in got] == [ids[j] for j in expect]
