"""Fixtures for the indexing tests: the real embedded store, real spaCy and MiniLM models.

Tests use a profile with only the skeleton steps (sentence_knn, section_similarity) so they
exercise this package's pipeline without depending on the entity-graph steps.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from graphroute.core.api.store import GraphStore
from graphroute.core.config.index_profile import ComponentSpec, IndexProfile, ParseSettings
from graphroute.core.config.settings import Settings
from graphroute.core.engine import open_store
from graphroute.core.index.pipeline import Indexer
from graphroute.core.registry import Registry, get_registry

SAMPLE_CORPUS = Path(__file__).resolve().parents[2] / "examples" / "sample_corpus"
MUSIQUE = Path("/work/shared/datasets/musique/corpus.json")


def skeleton_profile(threshold: float = 0.90, k: int = 2, **parse: object) -> IndexProfile:
    return IndexProfile(
        name="skeleton-test",
        steps=[
            ComponentSpec(use="sentence_knn", **{"with": {"threshold": threshold, "k": k}}),
            ComponentSpec(use="section_similarity", **{"with": {"threshold": 0.43, "max_edges": 5}}),
        ],
        parse=ParseSettings(**parse),  # type: ignore[arg-type]
    )


@pytest.fixture(scope="session")
def registry() -> Registry:
    return get_registry()


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    s = Settings()
    s.cache_dir = tmp_path / "cache"
    return s


@pytest.fixture
def store(tmp_path: Path) -> Iterator[GraphStore]:
    st = open_store(str(tmp_path / "store"))
    yield st
    st.close()


@pytest.fixture
def make_indexer(store: GraphStore, registry: Registry, settings: Settings):  # type: ignore[no-untyped-def]
    def make(group: str = "g", profile: IndexProfile | None = None) -> Indexer:
        return Indexer(store, group, registry=registry, settings=settings, profile=profile or skeleton_profile())

    return make
