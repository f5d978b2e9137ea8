"""The stage contract: what a query-time stage declares and how it runs.

A stage is a small class with four declarations the route loader checks *before* anything
runs (Haystack-style typed inputs and outputs):

* ``name``      - the registered name routes refer to (``use: score_gap``);
* ``kind``      - seed source, expander, denoiser or synthesizer;
* ``Params``    - a pydantic model; route parameters are validated against it at load time;
* ``consumes`` / ``produces`` - the :class:`Slot` s of :class:`QueryState` it reads and writes;
  ``reads`` - slots it uses when an earlier stage produced them; ``slot_params`` - parameters
  that replace a slot, refused when an earlier stage produces it.

Stages mutate the shared :class:`QueryState` and record what they did in ``ctx.stats``.
They are synchronous by default; a stage that waits on the network overrides ``arun``.
"""

from __future__ import annotations

import copy
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

import numpy as np
from graphroute.core.api.models import Citation, Evidence, ScoredNode, Seed, SeedArray
from graphroute.core.api.values import strict_booleans
from pydantic import BaseModel, ConfigDict, model_validator

if TYPE_CHECKING:
    from graphroute.core.api.components import Embedder, LLMClient
    from graphroute.core.api.store import GraphStore


class Services(Protocol):
    """What a running stage may use besides the state (``ctx.services``): the store, the group,
    the group's embedder and the LLM clients. The kernel's query runner provides it."""

    store: GraphStore
    group: str
    settings: Any

    def embedder(self) -> Embedder:
        """The embedder the group was indexed with."""
        ...

    def embed_query(self, text: str) -> np.ndarray:
        """The question's vector, computed once per query."""
        ...

    def embed_queries(self, texts: Sequence[str]) -> list[np.ndarray]:
        """Several query vectors, the uncached ones in one model call."""
        ...

    def llm(self) -> LLMClient | None:
        """The process LLM client (``GRAPHROUTE_LLM``), or None when offline."""
        ...

    def stage_llm(self, name: str | None, params: dict[str, object] | None) -> LLMClient | None:
        """The client a stage names in its route (``llm: openai`` plus ``llm_params``), or the
        process client when it names none."""
        ...

    def for_group(self, group: str) -> Services:
        """The same models for another group."""
        ...


class StageKind(StrEnum):
    SEED_SOURCE = "seed_source"
    EXPANDER = "expander"
    DENOISER = "denoiser"
    SYNTHESIZER = "synthesizer"


class Slot(StrEnum):
    """Typed fields of :class:`QueryState` that stages consume and produce."""

    QUERY = "query"  # always available: the question and the group
    SEED_NAMES = "seed_names"  # names pulled from the query (NER)
    SEEDS = "seeds"  # seeds resolved to nodes, with tier weights: records and arrays
    TIER_WEIGHTS = "tier_weights"  # (w1, w2, w3) chosen for the query
    # PPR damping chosen for the question: weight_profile sets it from the question's profile,
    # unified_seeds refines it from the effective entity weight unless it was fixed, and ppr
    # reads it when its own `damping` is null.
    DAMPING = "damping"
    NODE_SCORES = "node_scores"  # PPR mass of every graph node (entities, chunks) for the query
    ENTITIES = "entities"  # ranked entities (e.g. after PPR)
    EVIDENCE = "evidence"  # ranked evidence records
    CONTEXT = "context"  # the assembled, cited context for the synthesizer
    ANSWER = "answer"  # the answer and its citations


# ``json_schema_extra`` of a stage parameter that chooses where the process connects and
# which of its environment variables (an API key's) it sends there: a route file on the
# server sets it, an HTTP request's overrides never do (a client would name its own URL and
# the server's secret)
SERVER_SIDE: dict[str, Any] = {"server_side": True}


class StageParams(BaseModel):
    """Base for every stage's ``Params``: unknown keys are an error, not silently ignored,
    and a boolean given as text follows :func:`~graphroute.core.api.values.parse_bool`."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    @model_validator(mode="before")
    @classmethod
    def _strict_booleans(cls, data: Any) -> Any:
        return strict_booleans(cls, data)

    @classmethod
    def server_side(cls) -> list[str]:
        """The parameters marked :data:`SERVER_SIDE`."""
        return [
            name for name, info in cls.model_fields.items()
            if isinstance(info.json_schema_extra, dict) and info.json_schema_extra.get("server_side")
        ]


@dataclass(frozen=True)
class DampingRule:
    """How the damping follows the entity weight: ``base + slope * w1``, unless ``fixed``."""

    base: float = 0.70
    slope: float = 0.20
    fixed: bool = False

    def damping(self, w1: float) -> float:
        return self.base + self.slope * w1


@dataclass
class QueryState:
    """The blackboard a route's stages share for one question."""

    question: str
    group: str
    seed_names: list[str] = field(default_factory=list)
    seeds: list[Seed] = field(default_factory=list)
    seed_arrays: list[SeedArray] = field(default_factory=list)  # many seeds of one tier (SeedArray)
    tier_weights: dict[str, float] = field(default_factory=dict)
    damping: float | None = None
    damping_rule: DampingRule | None = None
    profile: str | None = None
    entities: list[ScoredNode] = field(default_factory=list)
    node_scores: Mapping[str, float] = field(default_factory=dict)
    evidence: list[Evidence] = field(default_factory=list)
    context: str = ""
    context_evidence: list[Evidence] = field(default_factory=list)
    answer: str = ""
    negative: bool = False
    citations: list[Citation] = field(default_factory=list)
    extras: dict[str, Any] = field(default_factory=dict)  # third-party stages' own data

    def size(self, slot: Slot) -> int:
        """How many items a slot holds; the trace's items_in / items_out."""
        match slot:
            case Slot.QUERY:
                return 1
            case Slot.SEED_NAMES:
                return len(self.seed_names)
            case Slot.SEEDS:
                return len(self.seeds) + sum(len(a) for a in self.seed_arrays)
            case Slot.TIER_WEIGHTS:
                return len(self.tier_weights)
            case Slot.DAMPING:
                return int(self.damping is not None)
            case Slot.NODE_SCORES:
                return len(self.node_scores)
            case Slot.ENTITIES:
                return len(self.entities)
            case Slot.EVIDENCE:
                return len(self.evidence)
            case Slot.CONTEXT:
                return len(self.context_evidence)
            case Slot.ANSWER:
                return len(self.citations) if self.answer else 0
        return 0

    def all_seeds(self) -> list[Seed]:
        """Every seed as a :class:`Seed` record: ``seeds``, then each of ``seed_arrays``."""
        return [*self.seeds, *(s for a in self.seed_arrays for s in a.records())]

    def fork(self) -> QueryState:
        """An independent copy for a parallel branch."""
        return copy.deepcopy(self)


@dataclass
class StageContext:
    """What a running stage may use besides the state: services and its own trace entry."""

    services: Services
    stage_id: str
    stats: dict[str, Any] = field(default_factory=dict)
    tokens: dict[str, int] = field(default_factory=dict)

    @property
    def group(self) -> str:
        return self.services.group

    def query_vector(self, text: str) -> np.ndarray:
        """The query embedding from the group's embedder, computed once per query."""
        return self.services.embed_query(text)

    def add_tokens(self, prompt: int = 0, completion: int = 0, cost_usd: float = 0.0) -> None:
        self.tokens["prompt"] = self.tokens.get("prompt", 0) + prompt
        self.tokens["completion"] = self.tokens.get("completion", 0) + completion
        if cost_usd:
            self.stats["cost_usd"] = round(float(self.stats.get("cost_usd", 0.0)) + cost_usd, 6)


class Stage(ABC):
    """Base class of every query-time stage, built-in or third-party.

    Subclasses set the class attributes and implement :meth:`run`. Example::

        class KeepTop(Stage):
            '''Keep the n best evidence records.'''
            name = "keep_top"
            kind = StageKind.DENOISER
            consumes = (Slot.EVIDENCE,)
            produces = (Slot.EVIDENCE,)

            class Params(StageParams):
                n: int = 5

            def run(self, state, ctx):
                state.evidence = state.evidence[: self.params.n]
                ctx.stats["kept"] = len(state.evidence)
    """

    name: ClassVar[str]
    kind: ClassVar[StageKind]
    consumes: ClassVar[tuple[Slot, ...]] = ()
    produces: ClassVar[tuple[Slot, ...]] = ()
    # Slots read when an earlier stage produced them, with a default otherwise.
    reads: ClassVar[tuple[Slot, ...]] = ()
    # Parameters that replace a slot: when one is set (not null) while an earlier enabled stage
    # produces that slot, the route is refused, so a value is never silently overridden.
    slot_params: ClassVar[dict[str, Slot]] = {}
    Params: ClassVar[type[StageParams]] = StageParams

    def __init__(self, params: StageParams | None = None) -> None:
        self.params = params if params is not None else self.Params()

    @abstractmethod
    def run(self, state: QueryState, ctx: StageContext) -> None:
        """Read the consumed slots of ``state``, write the produced ones."""

    async def arun(self, state: QueryState, ctx: StageContext) -> None:
        """Async entry point the runner awaits; override for network-bound stages."""
        self.run(state, ctx)

    @classmethod
    def describe(cls) -> str:
        """First line of the docstring: shown by ``graphroute plugins`` and the docs."""
        doc = (cls.__doc__ or "").strip()
        return doc.splitlines()[0] if doc else ""
