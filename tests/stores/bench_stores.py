"""Store benchmark (prints figures; not a test): write, iter_edges, adjacency export and
vector search on a synthetic group, per backend.

    .venv/bin/python -m tests.stores.bench_stores [--backend embedded|neo4j|both] [--sentences N]
"""

from __future__ import annotations

import argparse
import itertools
import tempfile
import time
import uuid

import numpy as np
from graphroute.core.api.models import Edge, EdgeType, Label, Node, VectorSpace
from graphroute.core.api.store import clear_derived
from graphroute.core.config.settings import Settings
from graphroute.core.engine import open_store
from graphroute.core.lib.graph import adjacency

from tests.dev_neo4j import NEO4J_URI


def build(group: str, n: int, docs: int, dim: int, rng: np.random.Generator):
    per = n // docs
    for d in range(docs):
        ids = [f"d{d}/s{i}" for i in range(per)]
        nodes = [Node(id=f"d{d}", label=Label.DOCUMENT, group=group, doc_id=f"d{d}", props={"title": f"Doc {d}"})]
        nodes += [Node(id=i, label=Label.SENTENCE, group=group, doc_id=f"d{d}", props={"text": f"sentence {i}"})
                  for i in ids]
        edges = [Edge(src=i, dst=f"d{d}", type=EdgeType.PART_OF, group=group, doc_id=f"d{d}") for i in ids]
        edges += [Edge(src=a, dst=b, type=EdgeType.NEXT, group=group, doc_id=f"d{d}") for a, b in itertools.pairwise(ids)]
        m = rng.normal(size=(per, dim)).astype(np.float32)
        m /= np.linalg.norm(m, axis=1, keepdims=True)
        yield f"d{d}", nodes, edges, {VectorSpace.SENTENCE: (ids, m)}


def bench(backend: str, n: int, docs: int, dim: int) -> None:
    rng = np.random.default_rng(0)
    location = tempfile.mkdtemp() if backend == "embedded" else NEO4J_URI
    settings = Settings()
    if backend == "neo4j" and not settings.neo4j_password:
        settings.neo4j_password = "graphroute-dev"
    store = open_store(location, settings=settings)
    group = f"bench-{uuid.uuid4().hex[:8]}"
    try:
        t = time.perf_counter()
        for doc_id, nodes, edges, vecs in build(group, n, docs, dim, rng):
            store.write(group, nodes, edges, vecs, replace_doc=doc_id)
        t_write = time.perf_counter() - t
        ids = [f"d0/s{i}" for i in range(n // docs)]
        sims = [Edge(src=ids[i], dst=f"d{1 + i % (docs - 1)}/s{i}", type=EdgeType.RELATED_TO, group=group,
                     props={"similarity": 0.95}) for i in range(len(ids))]
        store.write(group, edges=sims)
        t = time.perf_counter()
        edges = sum(1 for _ in store.iter_edges(group))
        t_iter = time.perf_counter() - t
        clear_derived()
        t = time.perf_counter()
        view = adjacency(store, group, {EdgeType.NEXT: 1.0, EdgeType.PART_OF: 1.0, EdgeType.RELATED_TO: 1.0})
        t_adj = time.perf_counter() - t
        q = rng.normal(size=dim).astype(np.float32)
        store.vector_search(group, VectorSpace.SENTENCE, q, 10)  # loads / warms
        t = time.perf_counter()
        for _ in range(20):
            store.vector_search(group, VectorSpace.SENTENCE, q, 10)
        t_search = (time.perf_counter() - t) / 20
        t = time.perf_counter()
        doc_id, nodes, e2, vecs = next(build(group, n, docs, dim, rng))
        store.write(group, nodes, e2, vecs, replace_doc=doc_id)
        t_replace = time.perf_counter() - t
        print(f"{backend}: {n} sentences in {docs} docs, {edges} edges, dim {dim}")
        print(f"  write (per-doc transactions) {t_write:.2f} s  ({n / t_write:.0f} sentences/s)")
        print(f"  iter_edges                   {t_iter:.3f} s  ({edges / t_iter:.0f} edges/s)")
        print(f"  adjacency export             {t_adj:.3f} s  ({view.matrix.shape[0]} nodes, nnz {view.matrix.nnz})")
        print(f"  vector_search k=10           {t_search * 1000:.1f} ms")
        print(f"  replace_doc of one document  {t_replace:.3f} s")
    finally:
        store.delete_group(group)
        store.close()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", default="both", choices=["embedded", "neo4j", "both"])
    ap.add_argument("--sentences", type=int, default=20_000)
    ap.add_argument("--docs", type=int, default=40)
    ap.add_argument("--dim", type=int, default=384)
    a = ap.parse_args()
    for backend in (["embedded", "neo4j"] if a.backend == "both" else [a.backend]):
        bench(backend, a.sentences, a.docs, a.dim)


if __name__ == "__main__":
    main()
