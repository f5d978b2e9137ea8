"""Remote embedders: Voyage (``voyage``, incl. contextualized voyage-context-3) and OpenAI
(``openai``), plus the dimension check between an embedder and a group's stored vectors.

Why contextualized embeddings: voyage-context-3 embeds each unit (sentence, chunk) *in the
context of its whole document*, so "It was founded in 1902." carries the document's subject.
``embed_contextual`` sends one input list per document; queries are embedded on their own
with ``input_type="query"``.

Every call: timeout, bounded retries with backoff on 429 / 5xx / timeouts (the SDKs' own
retries are off; :func:`graphroute.core.lib.llm.call_with_retries` applies), API key read from
the environment variable named by ``api_key_env`` and never printed. Token usage and cost
accumulate in ``embedder.usage`` (``tokens``, ``calls``, ``retries``, ``cost_usd``).

Dimension check: :func:`check_dimension` compares an embedder with the vectors a group
already stores and raises :class:`EmbeddingDimensionError` with the fix. Call it where
queries or indexing meet the store (``Services.embed_query`` before the first search of a
group, and the indexer before writing vectors into a non-empty space).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Collection, Sequence
from functools import partial
from typing import Any, TypeVar

import numpy as np
from graphroute.core.api.components import ComponentParams, Embedder
from graphroute.core.api.models import VectorSpace
from graphroute.core.api.store import GraphStore
from graphroute.core.errors import EmbeddingDimensionError, LLMConfigError
from graphroute.core.hookspecs import hookimpl
from graphroute.core.lib.deadline import capped
from graphroute.core.lib.knn import normalise_in_place
from graphroute.core.lib.llm import RetryPolicy, call_with_retries
from graphroute.plugins.llm.openai_chat import (
    OpenAIConnection,
    Price,
    classify_openai_error,
    cost_usd,
    openai_sdk_client,
)
from pydantic import Field

T = TypeVar("T")

# ----------------------------------------------------------------------------- dimension check




def stored_dimension(store: GraphStore, group: str, space: str) -> int | None:
    """The dimension of a group's non-empty vector space, or None when it holds nothing.

    Uses a store's optional ``dimension(group, space)`` method when it has one (cheap);
    otherwise reads the space's vectors once.
    """
    probe = getattr(store, "dimension", None)
    if callable(probe):
        dim = probe(group, space)
        return int(dim) if dim else None
    counts = store.counts(group).get("vectors", {})
    if not counts.get(str(space)):
        return None
    _, matrix = store.all_vectors(group, str(space))
    return int(matrix.shape[1]) if matrix.ndim == 2 and matrix.shape[0] else None


def check_dimension(
    store: GraphStore,
    group: str,
    embedder: Embedder,
    spaces: Collection[str] = (VectorSpace.SENTENCE, VectorSpace.CHUNK),
) -> None:
    """Raise :class:`EmbeddingDimensionError` when ``embedder`` produces vectors of another
    dimension than the group stores in any of ``spaces`` (empty spaces are fine)."""
    want = embedder.dimension
    for space in spaces:
        have = stored_dimension(store, group, str(space))
        if have is not None and have != want:
            raise EmbeddingDimensionError(
                f"group {group!r} stores {have}-d vectors in space {str(space)!r}, but embedder "
                f"{embedder.model_id!r} produces {want}-d vectors. Query with the embedder the group "
                f"was indexed with, or re-index the group with this embedder (delete the group, then "
                f"`graphroute index`)."
            )


# ----------------------------------------------------------------------------- shared plumbing


def _normalise(m: np.ndarray) -> np.ndarray:
    """Unit rows (a copy, float32, C order); a single vector becomes one row."""
    m = np.array(m, dtype=np.float32, order="C", ndmin=2)
    return normalise_in_place(m)


class _Usage:
    """Thread-safe running totals of a remote embedder's calls."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.data: dict[str, float] = {"calls": 0, "retries": 0, "tokens": 0, "cost_usd": 0.0}

    def add(self, tokens: int, retries: int, cost: float) -> None:
        with self._lock:
            self.data["calls"] += 1
            self.data["retries"] += retries
            self.data["tokens"] += tokens
            self.data["cost_usd"] = round(self.data["cost_usd"] + cost, 8)


# ----------------------------------------------------------------------------- Voyage

VOYAGE_DIMS = {
    "voyage-context-3": 1024,
    "voyage-3.5": 1024,
    "voyage-3.5-lite": 1024,
    "voyage-3-large": 1024,
    "voyage-code-3": 1024,
    "voyage-3": 1024,
    "voyage-3-lite": 512,
}
# USD per million tokens (list prices at the time of writing); override with `prices`.
VOYAGE_PRICES = {
    "voyage-context-3": Price(input=0.18),
    "voyage-3.5": Price(input=0.06),
    "voyage-3.5-lite": Price(input=0.02),
    "voyage-3-large": Price(input=0.18),
    "rerank-2.5": Price(input=0.05),
    "rerank-2.5-lite": Price(input=0.02),
}


def classify_voyage_error(exc: BaseException) -> tuple[bool, float | None, int | None]:
    """(retryable, retry_after, status) for exceptions of the voyageai SDK: 429, every 5xx,
    timeouts and connection errors are retried (the SDK itself would not retry a 500)."""
    from voyageai import error

    if isinstance(exc, error.Timeout | error.APIConnectionError):
        return True, None, None
    if isinstance(exc, error.VoyageError):
        status = getattr(exc, "http_status", None)
        if status is None:
            return False, None, None
        from graphroute.core.lib.llm import retry_after_from_headers

        retry_after = retry_after_from_headers(getattr(exc, "headers", None) or {})
        return status == 429 or status >= 500, retry_after, int(status)
    return False, None, None


class VoyageConnection(ComponentParams):
    """How to reach the Voyage API (shared by the embedder and the reranker)."""

    base_url: str | None = Field(None, description="API base URL (default: VOYAGE_BASE_URL or https://api.voyageai.com/v1).")
    api_key_env: str = Field("VOYAGE_API_KEY", description="NAME of the environment variable holding the API key.")
    timeout: float = Field(60.0, gt=0.0, le=3600.0, description="Seconds per request.")
    max_retries: int = Field(3, ge=0, le=10, description="Retries on 429 / 5xx / timeout, with backoff.")
    backoff_s: float = Field(0.5, ge=0.0, le=60.0, description="First backoff delay; doubles per retry.")
    max_backoff_s: float = Field(8.0, ge=0.0, le=300.0, description="Cap on one backoff delay.")
    prices: dict[str, Price] = Field(
        default_factory=lambda: dict(VOYAGE_PRICES), description="USD per million tokens by model."
    )


def voyage_sdk_client(conn: VoyageConnection) -> tuple[Any, str]:
    """The voyageai client (SDK retries off) and a printable endpoint (no secret)."""
    import voyageai

    key = os.environ.get(conn.api_key_env, "")
    if not key:
        raise LLMConfigError(f"no Voyage API key: set the environment variable {conn.api_key_env}")
    base_url = conn.base_url or os.environ.get("VOYAGE_BASE_URL") or None
    client = voyageai.Client(api_key=key, max_retries=0, timeout=conn.timeout, base_url=base_url)
    return client, (base_url or "https://api.voyageai.com/v1").rstrip("/")


class VoyageBase:
    """Lazy client + retried calls with usage accounting, shared by embedder and reranker."""

    params: VoyageConnection
    usage: _Usage

    def _init_remote(self) -> None:
        self._client: Any = None
        self._endpoint = ""
        self._client_lock = threading.Lock()
        self.usage = _Usage()

    def _sdk(self) -> Any:
        with self._client_lock:
            if self._client is None:
                self._client, self._endpoint = voyage_sdk_client(self.params)
            return self._client

    def _call(self, fn: Callable[[Any], T], *, model: str, what: str, tokens: Callable[[T], int]) -> T:
        client = self._sdk()
        p = self.params
        result, retries = call_with_retries(
            lambda: fn(client),
            policy=RetryPolicy(p.max_retries, p.backoff_s, p.max_backoff_s),
            classify=classify_voyage_error,
            what=f"voyage {what} ({model} at {self._endpoint})",
        )
        n = int(tokens(result))
        self.usage.add(n, retries, cost_usd(model, p.prices, n, 0))
        return result


class VoyageEmbedder(VoyageBase, Embedder):
    """Voyage AI embeddings; voyage-context-3 embeds each unit in its document's context."""

    name = "voyage"

    class Params(VoyageConnection):
        model: str = Field("voyage-context-3", description="Voyage embedding model.")
        output_dimension: int | None = Field(
            None, description="256, 512, 1024 or 2048 for models that support it (default: the model's)."
        )
        contextual: bool | None = Field(
            None, description="Use the contextualized endpoint (default: yes for voyage-context-* models)."
        )
        batch_size: int = Field(128, ge=1, le=1000, description="Texts (or document units) per request.")
        max_batch_tokens: int = Field(
            100_000, ge=1000, le=120_000,
            description="Approximate tokens per contextualized request (the API allows 120k).",
        )

    params: Params

    def __init__(self, params: ComponentParams | None = None) -> None:
        super().__init__(params)
        self._init_remote()

    def __repr__(self) -> str:
        return f"VoyageEmbedder(model={self.params.model!r}, dimension={self.dimension})"

    @property
    def is_contextual(self) -> bool:
        if self.params.contextual is not None:
            return self.params.contextual
        return self.params.model.startswith("voyage-context")

    @property
    def model_id(self) -> str:
        return f"voyage:{self.params.model}:{self.dimension}"

    @property
    def dimension(self) -> int:
        if self.params.output_dimension:
            return self.params.output_dimension
        dim = VOYAGE_DIMS.get(self.params.model)
        if dim is None:
            raise LLMConfigError(
                f"unknown dimension of Voyage model {self.params.model!r}: set output_dimension"
            )
        return dim

    def _contextual_call(self, docs: list[list[str]], input_type: str) -> list[np.ndarray]:
        res = self._call(
            lambda c: c.contextualized_embed(
                inputs=docs, model=self.params.model, input_type=input_type,
                output_dimension=self.params.output_dimension,
            ),
            model=self.params.model, what="contextualized embeddings", tokens=lambda r: r.total_tokens,
        )
        out = [_normalise(np.asarray(r.embeddings, dtype=np.float32)) for r in res.results]
        if len(out) != len(docs) or any(len(o) != len(d) for o, d in zip(out, docs, strict=True)):
            raise RuntimeError("voyage returned a different number of embeddings than inputs")
        return out

    def embed(self, texts: Sequence[str], *, input_type: str = "document") -> np.ndarray:
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        parts: list[np.ndarray] = []
        bs = self.params.batch_size
        for i in range(0, len(texts), bs):
            batch = texts[i : i + bs]
            if self.is_contextual:
                # each text is its own one-unit document (queries, standalone texts)
                parts.extend(self._contextual_call([[t] for t in batch], input_type))
            else:
                res = self._call(
                    partial(self._plain_call, batch, input_type),
                    model=self.params.model, what="embeddings", tokens=lambda r: r.total_tokens,
                )
                parts.append(_normalise(np.asarray(res.embeddings, dtype=np.float32)))
        return _check(np.vstack(parts), self.dimension, self.params.model)

    def _plain_call(self, batch: list[str], input_type: str, client: Any) -> Any:
        return client.embed(
            batch, model=self.params.model, input_type=input_type,
            output_dimension=self.params.output_dimension,
        )

    def embed_contextual(self, documents: Sequence[Sequence[str]]) -> list[np.ndarray]:
        if not self.is_contextual:
            return super().embed_contextual(documents)
        out: list[np.ndarray] = [np.zeros((0, self.dimension), np.float32)] * len(documents)
        batch: list[int] = []
        units = tokens = 0
        for di, doc in enumerate(documents):
            if not doc:
                continue
            doc_tokens = sum(len(u.split()) for u in doc) * 4 // 3 + 1
            if batch and (units + len(doc) > 1000 or tokens + doc_tokens > self.params.max_batch_tokens):
                self._flush(documents, batch, out)
                batch, units, tokens = [], 0, 0
            batch.append(di)
            units += len(doc)
            tokens += doc_tokens
        if batch:
            self._flush(documents, batch, out)
        return out

    def _flush(self, documents: Sequence[Sequence[str]], batch: list[int], out: list[np.ndarray]) -> None:
        vecs = self._contextual_call([list(documents[i]) for i in batch], "document")
        for i, v in zip(batch, vecs, strict=True):
            out[i] = _check(v, self.dimension, self.params.model)


def _check(m: np.ndarray, dim: int, model: str) -> np.ndarray:
    if m.ndim != 2 or m.shape[1] != dim:
        raise EmbeddingDimensionError(f"{model} returned {m.shape[-1]}-d vectors, expected {dim}-d")
    return m


# ----------------------------------------------------------------------------- OpenAI

OPENAI_DIMS = {"text-embedding-3-small": 1536, "text-embedding-3-large": 3072, "text-embedding-ada-002": 1536}


class OpenAIEmbedder(Embedder):
    """OpenAI (or OpenAI-compatible / Azure) embeddings endpoint."""

    name = "openai"

    class Params(OpenAIConnection):
        model: str = Field("text-embedding-3-small", description="Embedding model (Azure: the deployment's model).")
        dimensions: int | None = Field(
            None, ge=1, le=8192, description="Shorten vectors (text-embedding-3-*); default: the model's."
        )
        batch_size: int = Field(256, ge=1, le=2048, description="Texts per request.")
        prices: dict[str, Price] = Field(
            default_factory=lambda: {
                "text-embedding-3-small": Price(input=0.02),
                "text-embedding-3-large": Price(input=0.13),
            },
            description="USD per million tokens by model.",
        )

    params: Params

    def __init__(self, params: ComponentParams | None = None) -> None:
        super().__init__(params)
        self._client: Any = None
        self._endpoint = ""
        self._lock = threading.Lock()
        self.usage = _Usage()

    def __repr__(self) -> str:
        return f"OpenAIEmbedder(model={self.params.model!r}, dimension={self.dimension})"

    @property
    def model_id(self) -> str:
        return f"openai:{self.params.model}:{self.dimension}"

    @property
    def dimension(self) -> int:
        if self.params.dimensions:
            return self.params.dimensions
        dim = OPENAI_DIMS.get(self.params.model)
        if dim is None:
            raise LLMConfigError(f"unknown dimension of embedding model {self.params.model!r}: set dimensions")
        return dim

    def _sdk(self) -> Any:
        with self._lock:
            if self._client is None:
                self._client, self._endpoint = openai_sdk_client(self.params)
            return self._client

    def embed(self, texts: Sequence[str], *, input_type: str = "document") -> np.ndarray:
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        client = self._sdk()
        p = self.params
        parts = []
        for i in range(0, len(texts), p.batch_size):
            batch = texts[i : i + p.batch_size]
            kwargs: dict[str, Any] = {"model": p.model, "input": batch}
            if p.dimensions:
                kwargs["dimensions"] = p.dimensions
            res, retries = call_with_retries(
                partial(_create_embeddings, client, kwargs, p.timeout),
                policy=RetryPolicy(p.max_retries, p.backoff_s, p.max_backoff_s),
                classify=classify_openai_error,
                what=f"openai embeddings ({p.model} at {self._endpoint})",
            )
            rows = sorted(res.data, key=lambda d: d.index)
            parts.append(_normalise(np.asarray([r.embedding for r in rows], dtype=np.float32)))
            n = int(res.usage.prompt_tokens) if res.usage else 0
            self.usage.add(n, retries, cost_usd(p.model, p.prices, n, 0))
        return _check(np.vstack(parts), self.dimension, p.model)


def _create_embeddings(client: Any, kwargs: dict[str, Any], timeout: float) -> Any:
    """One embeddings request, given at most what is left of the query's time."""
    return client.embeddings.create(**kwargs, timeout=capped(timeout))


@hookimpl
def register_embedders() -> list[type[Embedder]]:
    return [VoyageEmbedder, OpenAIEmbedder]
