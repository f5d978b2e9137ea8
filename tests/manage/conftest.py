"""A small real corpus indexed with the default profile (spaCy, MiniLM, entity graph,
communities) into the embedded store, for the commands that manage what is indexed."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from graphroute.core.config.settings import Settings
from graphroute.core.engine import GraphRoute

DOCS = {
    "lighthouse.md": "# Lighthouse\n\nThe Kestrel Point lighthouse was built by Ada Marlow in 1871. "
    "Its keeper Tobias Wren logged every storm in a leather book.\n",
    "orchard.md": "# Orchard\n\nThe Hollybrook orchard grows Pippin apples for the Harvest Fair. "
    "Mira Castell prunes the trees every February.\n",
    "harbour.md": "# Harbour\n\nThe Saltmarsh harbour shelters forty fishing boats. "
    "Harbour master Jonas Pell opens the lock gates at dawn.\n",
}


def write_corpus(folder: Path, names: list[str] | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in DOCS.items():
        if names is None or name in names:
            (folder / name).write_text(text, encoding="utf-8")
    return folder


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    s = Settings()
    s.store = str(tmp_path / "store")
    s.cache_dir = tmp_path / "cache"
    return s


@pytest.fixture
def indexed(tmp_path: Path, settings: Settings) -> Iterator[GraphRoute]:
    """Group `g` with the three documents, group `h` with one."""
    gr = GraphRoute(settings=settings, group="g")
    gr.index([write_corpus(tmp_path / "corpus")])
    gr.index([write_corpus(tmp_path / "other", ["orchard.md"])], group="h")
    yield gr
    gr.close()
