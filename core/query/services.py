"""What a running route may use: the store, the group, and lazily created models.

Models are expensive to load, so :class:`Services` creates them on first use and the
:class:`~graphroute.core.engine.GraphRoute` facade keeps one instance per process. The
embedder is the one the group was indexed with (recorded in the group's metadata), so a
query is always embedded in the same space as the index.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from graphroute.core.api.components import Embedder, LLMClient
from graphroute.core.api.constants import EMBEDDER_MODEL_META, INDEX_PROFILE_META
from graphroute.core.api.store import GraphStore
from graphroute.core.config.clients import make_component, make_llm
from graphroute.core.config.settings import Settings
from graphroute.core.errors import EmbedderMismatchError
from graphroute.core.registry import Registry, get_registry

# Stage-level LLM clients, one per distinct (name, params), shared by every query of the
# process; the most recently used STAGE_CLIENTS_MAX are kept, so a Python caller whose routes
# vary a client's params per call does not grow the process without bound (an OrderedDict:
# functools.lru_cache would need the params hashable).
STAGE_CLIENTS_MAX = 32
_stage_clients: OrderedDict[str, LLMClient] = OrderedDict()
_stage_clients_lock = threading.Lock()


def check_embedder_model(store: GraphStore, group: str, model_id: str) -> None:
    """Refuse to embed a query for a group whose vectors another embedder made.

    The indexer records the embedder's ``model_id`` (model and runtime: the default ONNX
    runtime and the torch extra's give vectors that are close, not equal) and puts it in the
    parse fingerprint, so one group's vectors always come from one embedder; a query in
    another embedder's space would rank evidence against vectors from elsewhere. A group
    indexed before the record existed passes.
    """
    recorded = store.get_meta(group, EMBEDDER_MODEL_META)
    if isinstance(recorded, str) and recorded != model_id:
        raise EmbedderMismatchError(
            f"group {group!r} holds vectors made by {recorded!r}, but this query embeds with "
            f"{model_id!r}; graphroute does not mix them. Query with the embedder the group was "
            f"indexed with, or re-index the group with this one (`graphroute index PATH --group {group}`)."
        )


class Services:
    """Per-(store, group) services with a per-query embedding cache."""

    def __init__(
        self,
        store: GraphStore,
        group: str,
        *,
        settings: Settings | None = None,
        registry: Registry | None = None,
        embedder: Embedder | None = None,
        llm: LLMClient | None = None,
        llm_factory: Callable[[], LLMClient | None] | None = None,
    ) -> None:
        self.store = store
        self.group = group
        self.settings = settings or Settings()
        self.registry = registry or get_registry()
        self._embedder = embedder
        self._embedder_checked = False
        self._llm = llm
        self._llm_factory = llm_factory
        self._lock = threading.Lock()
        self._query_cache: dict[str, np.ndarray] = {}

    # ------------------------------------------------------------------ models
    def index_profile(self) -> dict[str, Any] | None:
        profile = self.store.get_meta(self.group, INDEX_PROFILE_META)
        return profile if isinstance(profile, dict) else None

    def embedder(self) -> Embedder:
        """The group's embedder (as recorded at index time; the default profile's otherwise)."""
        with self._lock:
            if self._embedder is None:
                profile = self.index_profile()
                if profile is None:
                    from graphroute.core.config.index_profile import load_index_profile

                    profile = load_index_profile(None).model_dump(by_alias=True)
                self._embedder = make_component(self.registry.embedders, profile["embedder"])
            if not self._embedder_checked:
                check_embedder_model(self.store, self.group, self._embedder.model_id)
                self._embedder_checked = True
            return self._embedder

    def llm(self) -> LLMClient | None:
        """The configured LLM client, or None when the route runs offline."""
        with self._lock:
            if self._llm is None and self._llm_factory is not None:
                self._llm = self._llm_factory()
            return self._llm

    def stage_llm(self, name: str | None, params: dict[str, object] | None) -> LLMClient | None:
        """The LLM client a stage should use.

        A stage may name its own client in the route (``llm: openai`` plus ``llm_params``), so a
        route YAML alone can switch between offline and remote models; otherwise the process
        client (``GRAPHROUTE_LLM``) is used. Stage-level clients are built once per distinct
        configuration and shared by every query of the process (same cache, same pool); the
        :data:`STAGE_CLIENTS_MAX` most recently used configurations are kept.
        """
        if not name:
            return self.llm()
        key = json.dumps([name, params or {}], sort_keys=True, default=str)
        with _stage_clients_lock:
            client = _stage_clients.get(key)
            if client is None:
                client = make_llm(self.registry, name, dict(params or {}))
                _stage_clients[key] = client
                while len(_stage_clients) > STAGE_CLIENTS_MAX:
                    _stage_clients.popitem(last=False)  # a query using it keeps its own reference
            else:
                _stage_clients.move_to_end(key)
        return client

    def embed_query(self, text: str) -> np.ndarray:
        vec = self._query_cache.get(text)
        if vec is None:
            vec = self.embedder().embed_query(text)
            if len(self._query_cache) > 256:
                self._query_cache.clear()
            self._query_cache[text] = vec
        return vec

    def clear_query_cache(self) -> None:
        """Forget embedded questions, so the next route pays for its own embedding (benchmarks
        timing routes one after another on the same questions)."""
        self._query_cache.clear()

    def embed_queries(self, texts: Sequence[str]) -> list[np.ndarray]:
        """:meth:`embed_query` for several texts, with the uncached ones in ONE model call
        (a stage that embeds several short names per query pays one forward pass, not one
        each); the vectors go into the same per-query cache, so a later ``embed_query`` of
        any of them is free. An embedder with its own ``embed_query`` is called per text."""
        emb = self.embedder()
        missing = [t for t in dict.fromkeys(texts) if t not in self._query_cache]
        if len(missing) > 1 and type(emb).embed_query is Embedder.embed_query:
            vecs = emb.embed(missing, input_type="query")
            if len(self._query_cache) + len(missing) > 256:
                self._query_cache.clear()
            for t, v in zip(missing, vecs, strict=True):
                self._query_cache[t] = v
        return [self.embed_query(t) for t in texts]

    def for_group(self, group: str) -> Services:
        """Same models, another group."""
        s = Services(self.store, group, settings=self.settings, registry=self.registry, llm=self._llm, llm_factory=self._llm_factory)
        s._embedder = self._embedder
        return s
