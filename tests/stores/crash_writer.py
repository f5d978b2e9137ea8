"""Writer process for the crash test: rewrites one document forever (killed with SIGKILL).

Generation g writes document "doc" with 2000 + 97 * (g % 5) sentences chained by NEXT, their
vectors, and meta {"gen": g}, all in one ``write(replace_doc=...)``. Prints "writing <g>" right
before each write and "gen <g>" after its commit. Usage: python crash_writer.py STORE_DIR START_GEN [STOP_GEN]
"""

from __future__ import annotations

import itertools
import sys

import numpy as np
from graphroute.core.api.models import Edge, EdgeType, Label, Node, VectorSpace
from graphroute.core.engine import open_store

GROUP = "crash"
DIM = 32


def size(gen: int) -> int:
    return 2000 + 97 * (gen % 5)


def generation(gen: int) -> tuple[list[Node], list[Edge], dict[str, tuple[list[str], np.ndarray]]]:
    n = size(gen)
    ids = [f"doc/{i}" for i in range(n)]
    nodes = [Node(id="doc", label=Label.DOCUMENT, group=GROUP, doc_id="doc", props={"gen": gen})]
    nodes += [Node(id=i, label=Label.SENTENCE, group=GROUP, doc_id="doc", props={"gen": gen, "text": "x" * 200})
              for i in ids]
    edges = [Edge(src=a, dst=b, type=EdgeType.NEXT, group=GROUP, doc_id="doc", props={"gen": gen})
             for a, b in itertools.pairwise(ids)]
    vecs = np.full((n, DIM), float(gen), dtype=np.float32)
    return nodes, edges, {VectorSpace.SENTENCE: (ids, vecs)}


def main() -> None:
    store = open_store(sys.argv[1])
    gen = int(sys.argv[2])
    stop = int(sys.argv[3]) if len(sys.argv) > 3 else 10**9
    while gen < stop:
        nodes, edges, vecs = generation(gen)
        print(f"writing {gen}", flush=True)
        store.write(GROUP, nodes, edges, vecs, replace_doc="doc", meta={"gen": gen})
        print(f"gen {gen}", flush=True)
        gen += 1
    store.close()


if __name__ == "__main__":
    main()
