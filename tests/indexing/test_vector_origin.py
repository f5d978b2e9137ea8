"""A group records which embedder (model and runtime) made its vectors: switching the
embedder re-embeds every document, and a query with another embedder is refused."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from graphroute.core.api.constants import EMBEDDER_MODEL_META
from graphroute.core.api.store import GraphStore
from graphroute.core.config.index_profile import ComponentSpec
from graphroute.core.errors import EmbedderMismatchError
from graphroute.core.query.services import Services
from graphroute.plugins.embedders.local import MODEL_ID, LocalEmbedder

from .conftest import SAMPLE_CORPUS, skeleton_profile


def test_vectors_of_two_embedders_are_never_mixed(make_indexer, store: GraphStore, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    shutil.copy(SAMPLE_CORPUS / "appliance_warranty.txt", corpus)
    first = make_indexer().index_paths([corpus])
    assert first.indexed == 1
    assert store.get_meta("g", EMBEDDER_MODEL_META) == MODEL_ID
    assert Services(store, "g").embedder().model_id == MODEL_ID  # the recorded one: accepted

    short = LocalEmbedder(LocalEmbedder.Params(max_length=128))  # another model_id
    with pytest.raises(EmbedderMismatchError) as info:
        Services(store, "g", embedder=short).embedder()
    assert MODEL_ID in str(info.value) and short.model_id in str(info.value)
    assert "re-index" in str(info.value)

    again = make_indexer().index_paths([corpus])
    assert again.indexed == 0 and again.unchanged == 1  # same embedder: nothing to redo

    profile = skeleton_profile()
    profile.embedder = ComponentSpec(use="local", **{"with": {"max_length": 128}})
    switched = make_indexer(profile=profile).index_paths([corpus])
    assert switched.indexed == 1  # every document re-embedded with the new embedder
    assert store.get_meta("g", EMBEDDER_MODEL_META) == short.model_id
    assert Services(store, "g").embedder().model_id == short.model_id
    with pytest.raises(EmbedderMismatchError):
        Services(store, "g", embedder=LocalEmbedder()).embedder()
