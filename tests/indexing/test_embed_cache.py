"""The on-disk embedding cache: exact round trips, model isolation, concurrent processes."""

from __future__ import annotations

import multiprocessing as mp
from pathlib import Path

import numpy as np
from graphroute.core.lib.embed_cache import CachingEmbedder, EmbeddingCache, text_key
from graphroute.plugins.embedders.local import LocalEmbedder


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


def test_span_vectors_are_cached_by_text_heading_and_span(tmp_path: Path) -> None:
    inner = LocalEmbedder()
    cached = CachingEmbedder(inner, EmbeddingCache(tmp_path))
    texts = ["Fees\nThe fee is eight percent. Repairs need approval.", "Leave\nStaff get 25 days."]
    spans = [[(5, 31), (32, 51)], [(6, 25)]]
    first, first_spans = cached.embed_spans(texts, [5, 6], spans)
    again, again_spans = cached.embed_spans(texts, [5, 6], spans)
    assert inner.calls == 1 and cached.hits == 5 and cached.misses == 5
    assert np.array_equal(first, again) and all(np.array_equal(a, b) for a, b in zip(first_spans, again_spans, strict=True))
    assert np.allclose(cached.embed(texts), first, atol=1e-6) and inner.calls == 1  # a text's vector is embed()'s
    cached.embed_spans(texts[:1], [0], spans[:1])  # another heading: read again
    assert inner.calls == 2


def test_the_cache_keeps_each_way_of_reading_long_texts_apart(tmp_path: Path) -> None:
    """One cache, two settings of `long_texts`: each gets its own vector of a long text."""
    long = " ".join(f"Clause {j} of the charter names the guild and its harbour." for j in range(60))
    cache = EmbeddingCache(tmp_path)
    truncate = LocalEmbedder(LocalEmbedder.Params(long_texts="truncate"))
    first = CachingEmbedder(truncate, cache).embed([long])
    windows = CachingEmbedder(LocalEmbedder(), cache)
    second = windows.embed([long])
    assert windows.misses == 1
    assert np.allclose(second, LocalEmbedder().embed([long]), atol=1e-6)
    assert not np.allclose(first, second, atol=1e-3)
