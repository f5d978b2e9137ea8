"""The on-disk embedding cache: exact round trips, model isolation, concurrent processes."""

from __future__ import annotations

import multiprocessing as mp
from pathlib import Path

import numpy as np
from graphroute.core.lib.embed_cache import EmbeddingCache, text_key


def _writer(directory: str, worker: int, n: int) -> None:
    cache = EmbeddingCache(Path(directory))
    rng = np.random.default_rng(worker)
    for i in range(0, n, 10):
        # shared keys (both workers write them) and private keys
        items = [(text_key(f"shared {j}"), np.full(8, j, np.float32)) for j in range(i, i + 10)]
        items += [(text_key(f"w{worker} {j}"), rng.random(8).astype(np.float32)) for j in range(i, i + 10)]
        cache.put_many("m", items)
    cache.close()


def test_round_trip_and_model_isolation(tmp_path: Path) -> None:
    cache = EmbeddingCache(tmp_path)
    v = np.arange(4, dtype=np.float32)
    cache.put_many("model-a", [(text_key("hello"), v)])
    assert np.array_equal(cache.get_many("model-a", [text_key("hello")])[text_key("hello")], v)
    assert cache.get_many("model-b", [text_key("hello")]) == {}
    assert cache.get_many("model-a", [text_key("hello", "query")]) == {}  # query/document differ


def test_concurrent_processes_do_not_corrupt_the_cache(tmp_path: Path) -> None:
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(str(tmp_path), w, 200)) for w in (1, 2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    cache = EmbeddingCache(tmp_path)
    assert cache.count("m") == 200 + 2 * 200
    got = cache.get_many("m", [text_key(f"shared {j}") for j in range(200)])
    assert all(np.all(got[text_key(f"shared {j}")] == j) for j in range(200))
