"""Sentence vectors read from their chunk's pass (``sentence_vectors: in_chunk``) or, by
default (``alone``), each embedded on its own; switching re-embeds the group."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
from graphroute.core.api.models import VectorSpace
from graphroute.core.api.store import GraphStore

from .conftest import SAMPLE_CORPUS, skeleton_profile


def test_one_pass_over_the_chunks_gives_the_sentence_vectors(make_indexer, store: GraphStore, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    shutil.copy(SAMPLE_CORPUS / "appliance_warranty.txt", corpus)

    indexer = make_indexer(profile=skeleton_profile(sentence_vectors="in_chunk"))
    assert indexer.index_paths([corpus]).indexed == 1
    inner = indexer.embedder().inner
    chunks = store.count_nodes("g", "TextChunk")
    sentences = store.count_nodes("g", "Sentence")
    assert inner.texts_embedded == chunks < sentences  # no pass of the sentences' own
    ids, in_chunk = store.all_vectors("g", VectorSpace.SENTENCE.value)
    assert len(ids) == sentences

    alone = make_indexer()  # the default
    assert alone.index_paths([corpus]).indexed == 1  # another way to make vectors: re-embedded
    assert alone.embedder().inner.texts_embedded == sentences  # the chunk vector: the cached one
    ids_alone, vecs_alone = store.all_vectors("g", VectorSpace.SENTENCE.value)
    by_id = dict(zip(ids_alone, vecs_alone, strict=True))
    cos = np.einsum("ij,ij->i", in_chunk, np.stack([by_id[i] for i in ids]))
    assert cos.mean() > 0.7  # the same sentences, read two ways
    assert not np.allclose(cos, 1, atol=1e-3)
