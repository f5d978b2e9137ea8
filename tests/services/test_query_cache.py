"""The per-process question cache: a stage embedding the question twice pays once; a
benchmark clearing it between routes makes each route pay for its own embedding."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
from graphroute.core.api.components import Embedder
from graphroute.core.engine import open_store
from graphroute.core.query.services import Services


class CountingEmbedder(Embedder):
    """A deterministic bag-of-characters embedder that counts the texts it encodes."""

    name = "counting"

    def __init__(self) -> None:
        self.encoded: list[str] = []

    @property
    def model_id(self) -> str:
        return "counting"

    @property
    def dimension(self) -> int:
        return 26

    def embed(self, texts: Sequence[str], *, input_type: str = "document") -> np.ndarray:
        self.encoded.extend(texts)
        m = np.zeros((len(texts), 26), dtype=np.float32)
        for i, t in enumerate(texts):
            for ch in t.lower():
                if "a" <= ch <= "z":
                    m[i, ord(ch) - 97] += 1
        return m / np.maximum(np.linalg.norm(m, axis=1, keepdims=True), 1e-9)


def test_clear_query_cache_makes_the_next_embedding_pay_again(tmp_path: Path) -> None:
    emb = CountingEmbedder()
    with open_store(str(tmp_path / "s")) as store:
        svc = Services(store, "g", embedder=emb)
        first = svc.embed_query("who wrote brand")
        again = svc.embed_query("who wrote brand")
        assert emb.encoded == ["who wrote brand"] and np.array_equal(first, again)
        svc.clear_query_cache()
        svc.embed_query("who wrote brand")
        assert emb.encoded == ["who wrote brand", "who wrote brand"]
