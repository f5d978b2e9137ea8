"""Contracts of the non-stage plugin families: loaders, segmenters, embedders, index steps,
extractors, LLM clients and store backends.

Every family follows the same pattern as query stages: a class with a registered ``name``,
a pydantic ``Params`` model for its settings, and a small abstract interface. Plugins return
these classes from the ``register_*`` hooks in :mod:`graphroute.core.hookspecs`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
from graphroute.core.api.values import strict_booleans
from pydantic import BaseModel, ConfigDict, model_validator

if TYPE_CHECKING:
    from graphroute.core.api.store import GraphStore


class ComponentParams(BaseModel):
    """Base for component settings: unknown keys are an error; booleans follow the one
    boolean rule (:func:`~graphroute.core.api.values.strict_booleans`)."""

    model_config = ConfigDict(extra="forbid")

    @model_validator(mode="before")
    @classmethod
    def _strict_booleans(cls, data: Any) -> Any:
        return strict_booleans(cls, data)


class Component:
    """Shared shape: a registered name, validated params, a one-line description."""

    name: ClassVar[str]
    Params: ClassVar[type[ComponentParams]] = ComponentParams

    def __init__(self, params: ComponentParams | None = None) -> None:
        self.params = params if params is not None else self.Params()

    @classmethod
    def describe(cls) -> str:
        doc = (cls.__doc__ or "").strip()
        return doc.splitlines()[0] if doc else ""


# --------------------------------------------------------------------------- loading


@dataclass(frozen=True, slots=True)
class TextBox:
    """A run of a block's text and the rectangle it occupies on one page.

    ``start``/``end`` are character offsets into ``Block.text``; for a table block they are
    the row's index in ``Block.rows`` and that index plus one (a linearised row has no
    characters of its own in the source)."""

    start: int
    end: int
    page: int
    x0: float
    top: float
    x1: float
    bottom: float


@dataclass
class Block:
    """One structural block of a loaded document, in reading order.

    ``kind`` is one of: ``heading`` (with ``level``), ``paragraph``, ``table`` (with
    ``rows``: the first row is the header), ``figure_caption``, ``title``, ``kvp``,
    ``page_header``. Only paragraphs, figure captions and table rows become sentences; the
    rest is metadata (skeleton reference, "content taxonomy"). ``boxes`` is where the text
    sits on its page(s), for formats laid out on pages (PDF): runs of ``text`` (a table:
    rows) in reading order with their rectangles (:mod:`graphroute.core.lib.layout`);
    sentences cut from the block get the boxes of the lines they span.
    """

    kind: str
    text: str = ""
    level: int = 0
    page: int | None = None
    rows: list[list[str]] | None = None
    boxes: list[TextBox] | None = None


@dataclass
class SourceDocument:
    """A document as a loader produced it, before segmentation."""

    title: str
    source: str  # path or URI it came from
    blocks: list[Block]
    content_hash: str
    metadata: dict[str, Any] = field(default_factory=dict)


class Loader(Component):
    """Turns a file into :class:`SourceDocument` s (a JSON corpus yields many).

    ``by_default = False`` keeps a loader out of every run whose index profile does not name
    it under ``loaders:`` (e.g. one that sends files to a remote service).

    ``version``: raise it when the loader reads the same file into different blocks (a new
    heading rule, say); the next index run re-parses the documents an older version read,
    although their files did not change."""

    extensions: ClassVar[tuple[str, ...]] = ()
    by_default: ClassVar[bool] = True
    version: ClassVar[int] = 1

    def accepts(self, path: Path) -> bool:
        return path.suffix.lower() in self.extensions

    @abstractmethod
    def load(self, path: Path) -> Iterator[SourceDocument]:
        """Yield documents; raise :class:`LoaderError` with a clear reason on bad input."""

    def warn(self, message: str) -> None:
        """Report a part of the file being loaded that was left out while the rest was read
        (an entry without text, say), naming the part (``entry 3``, ``line 7``): the indexer
        lists it among the run's ``warnings`` after the file's path."""
        self.__dict__.setdefault("_warnings", []).append(message)

    def take_warnings(self) -> list[str]:
        """The warnings since the last call (the indexer takes them after each file)."""
        return self.__dict__.pop("_warnings", [])


# --------------------------------------------------------------------------- embedding


class Embedder(Component, ABC):
    """Text -> L2-normalised float32 vectors.

    ``model_id`` is recorded with the group's index so queries use the same model.
    ``document_id`` keys the on-disk embedding cache and the index's parse fingerprint.
    """

    @property
    @abstractmethod
    def model_id(self) -> str: ...

    @property
    def document_id(self) -> str:
        """``model_id`` plus whatever else decides how a document text becomes a vector
        without moving the query space (how a text longer than the model's window is read,
        say). A new value re-embeds the group's documents at its next index run, while the
        group stays queryable with the same ``model_id``."""
        return self.model_id

    @property
    @abstractmethod
    def dimension(self) -> int: ...

    @abstractmethod
    def embed(self, texts: Sequence[str], *, input_type: str = "document") -> np.ndarray:
        """Embed texts; ``input_type`` is "document" or "query"."""

    def embed_contextual(self, documents: Sequence[Sequence[str]]) -> list[np.ndarray]:
        """Embed each document's units in the context of that document.

        Models without native contextual embedding (the default) embed the units alone;
        voyage-context-3 overrides this.
        """
        flat = [u for doc in documents for u in doc]
        vectors = self.embed(flat) if flat else np.zeros((0, self.dimension), np.float32)
        out: list[np.ndarray] = []
        i = 0
        for doc in documents:
            out.append(vectors[i : i + len(doc)])
            i += len(doc)
        return out

    def embed_spans(
        self, texts: Sequence[str], heads: Sequence[int], spans: Sequence[Sequence[tuple[int, int]]],
    ) -> tuple[np.ndarray, list[np.ndarray]]:
        """Each text's vector and, read from the same pass over the text, one vector per
        character span ``(start, end)`` of it, pooled with the text's first ``heads[i]``
        characters (its heading): "late chunking", a sentence's vector in its passage's
        context without a pass of its own.

        Only models that expose token outputs can; the default (remote APIs) cannot, and the
        indexer then embeds each sentence on its own (``reads_spans`` tells which).
        """
        raise NotImplementedError(f"the {self.name!r} embedder cannot pool spans of a text")

    def embed_query(self, text: str) -> np.ndarray:
        return self.embed([text], input_type="query")[0]


# --------------------------------------------------------------------------- extraction


@dataclass
class Extraction:
    """Entities and (subject, relation, object) triples found in one text."""

    entities: list[str] = field(default_factory=list)
    triples: list[tuple[str, str, str]] = field(default_factory=list)


class Extractor(Component, ABC):
    """Finds entities (and relations, when it can) in chunk texts."""

    @abstractmethod
    def extract(self, texts: Sequence[str], *, titles: Sequence[str] | None = None) -> list[Extraction]:
        """One :class:`Extraction` per text, in order."""


# --------------------------------------------------------------------------- LLM


@dataclass
class LLMResponse:
    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    cached: bool = False
    # the model declined to answer: OpenAI's ``message.refusal``, or a content-filter stop
    refusal: str = ""
    # model replies behind this response (a JSON repair round makes two)
    calls: int = 1


class LLMClient(Component, ABC):
    """A chat-completion client (OpenAI-compatible by default)."""

    @abstractmethod
    def complete(
        self,
        messages: list[dict[str, str]],
        *,
        json_mode: bool = False,
        max_tokens: int | None = None,
        temperature: float = 0.0,
    ) -> LLMResponse: ...


# --------------------------------------------------------------------------- segmenting


class Segmenter(Component, ABC):
    """Splits paragraph text into sentences (spaCy by default)."""

    @abstractmethod
    def split(self, texts: Sequence[str]) -> list[list[tuple[int, int]]]:
        """For each text, the (start, end) character spans of its sentences."""


# --------------------------------------------------------------------------- index steps


class IndexStep(Component, ABC):
    """One step of the index profile after documents are parsed (edges, entities, ...).

    Steps run in profile order on the whole group; ``ctx.changed_docs`` says which
    documents were (re)written in this run so a step can work incrementally.
    """

    # Raised when what the step writes changes so that a layer built before must be rebuilt
    # (new edges the queries read): a group whose steps ran at a lower version runs them
    # again, on every document, at its next index run.
    layer_version: ClassVar[int] = 1

    @abstractmethod
    def run(self, ctx: IndexContext) -> dict[str, Any]:
        """Do the work; return statistics printed by ``graphroute index`` and stored."""


# --------------------------------------------------------------------------- stores


class StoreBackend(Component, ABC):
    """Opens a :class:`GraphStore` for a location (a directory or a URI)."""

    @classmethod
    @abstractmethod
    def handles(cls, location: str) -> bool:
        """True when this backend serves the location, e.g. ``neo4j://...``."""

    @classmethod
    def would_create(cls, location: str) -> bool:
        """True when opening ``location`` would make a new, empty store (an embedded store's
        folder without its database), which a command that only reads refuses. False for a
        server: its store is there, and what it lacks is groups, which those commands report."""
        return False

    @abstractmethod
    def open(self, location: str, **options: Any) -> GraphStore: ...


# --------------------------------------------------------------------------- index steps' context


@dataclass
class IndexContext:
    """What an :class:`~graphroute.core.api.components.IndexStep` gets."""

    store: GraphStore
    group: str
    registry: Any  # graphroute.core.registry.Registry: the plugin families
    embedder: Embedder
    profile: Any  # graphroute.core.config.index_profile.IndexProfile of this run
    settings: Any  # graphroute.core.config.settings.Settings (cache_dir, credentials)
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
