"""Index profiles and the context index steps run in.

An **index profile** is to indexing what a route is to querying: a YAML file (shipped ones
live in ``routes/index/``) naming the segmenter, the embedder, parsing limits and the
ordered index steps with their parameters. The profile a group was indexed with is stored
in the group's metadata, so queries embed with the same model.

The pipeline that loads, parses, embeds and writes documents, then runs the steps, is
:class:`Indexer` (``graphroute index``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .components import Embedder, LLMClient
from .registry import Registry
from .settings import Settings
from .store import GraphStore


class ComponentSpec(BaseModel):
    """``{use: name, with: {...}}`` for one component."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    use: str
    with_: dict[str, Any] = Field(default_factory=dict, alias="with")
    enabled: bool = True


class ParseSettings(BaseModel):
    """How documents become the skeleton (defaults from the skeleton reference)."""

    model_config = ConfigDict(extra="forbid")

    chunk_max_tokens: int = Field(512, ge=16, description="upper bound of a TextChunk, in whitespace tokens")
    min_sentence_chars: int = Field(12, ge=0, description="shorter sentences are noise (merged or dropped)")
    min_sentence_words: int = Field(3, ge=0, description="sentences with fewer words are merged into a neighbour")
    max_file_mb: float = Field(50.0, gt=0, description="larger files are refused with a clear message")
    label_prefix: bool = Field(True, description="embed `[Document: t | Section: p]` + text; stored text stays raw")
    cross_chunk_dedup: bool = Field(True, description="drop a sentence already seen in another chunk of the document")


class IndexProfile(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    name: str
    description: str = ""
    segmenter: ComponentSpec = ComponentSpec(use="spacy")
    embedder: ComponentSpec = ComponentSpec(use="local")
    parse: ParseSettings = ParseSettings()  # type: ignore[call-arg]
    steps: list[ComponentSpec] = Field(default_factory=list)


class IndexProfileError(Exception):
    pass


def builtin_index_profiles_dir() -> Path:
    return Path(str(resources.files("graphroute.routes"))) / "index"


def load_index_profile(name_or_path: str | None) -> IndexProfile:
    """Load a profile by name (``default``) or path; None means ``default``."""
    name_or_path = name_or_path or "default"
    p = Path(name_or_path)
    if not p.is_file():
        p = builtin_index_profiles_dir() / f"{name_or_path}.yaml"
    if not p.is_file():
        known = sorted(f.stem for f in builtin_index_profiles_dir().glob("*.yaml"))
        raise IndexProfileError(f"unknown index profile {name_or_path!r}; shipped profiles: {', '.join(known)}")
    try:
        data = yaml.safe_load(p.read_text(encoding="utf-8"))
        return IndexProfile.model_validate(data)
    except (yaml.YAMLError, ValidationError) as exc:
        raise IndexProfileError(f"{p}: invalid index profile: {exc}") from None


@dataclass
class IndexContext:
    """What an :class:`~graphroute.core.components.IndexStep` gets."""

    store: GraphStore
    group: str
    registry: Registry
    embedder: Embedder
    profile: IndexProfile
    settings: Settings
    changed_docs: set[str] = field(default_factory=set)  # doc ids (re)written this run
    removed_docs: set[str] = field(default_factory=set)
    llm_factory: Callable[[], LLMClient | None] | None = None
    stats: dict[str, Any] = field(default_factory=dict)

    @property
    def dirty(self) -> bool:
        """True when anything changed, so derived layers must be rebuilt."""
        return bool(self.changed_docs or self.removed_docs)

    def llm(self) -> LLMClient | None:
        return self.llm_factory() if self.llm_factory else None
