"""``voyage_rerank``: cross-encoder reranking of the evidence with Voyage rerank-2.5.

Off by default in the shipped routes: the predecessor found no reranker was needed while the
answer-bearing text sits at vector rank 1 (skeleton "Reranker Assessment"); it is here for
corpora where answers drop below the top 5. Scores are replaced by the reranker's relevance
(the previous score is kept in ``metadata["pre_rerank_score"]``), so ``token_budget`` packs
the context in the cross-encoder's order. Tokens and cost go into the trace.
"""

from __future__ import annotations

import asyncio
from typing import Any

from graphroute.core.api.stage import (
    SERVER_SIDE,
    QueryState,
    Slot,
    Stage,
    StageContext,
    StageKind,
    StageParams,
)
from graphroute.core.hookspecs import hookimpl
from graphroute.plugins.denoisers.context import strip_internal_tags
from graphroute.plugins.embedders.remote import VOYAGE_PRICES, VoyageBase, VoyageConnection
from pydantic import Field


class _Reranker(VoyageBase):
    def __init__(self, params: VoyageConnection) -> None:
        self.params = params
        self._init_remote()


class VoyageRerank(Stage):
    """Rerank evidence with the Voyage rerank-2.5 cross-encoder (remote; off by default)."""

    name = "voyage_rerank"
    kind = StageKind.DENOISER
    consumes = (Slot.EVIDENCE,)
    produces = (Slot.EVIDENCE,)

    class Params(StageParams):
        model: str = Field("rerank-2.5", description="Voyage reranker model.")
        top_k: int | None = Field(None, ge=1, le=1000, description="Keep the k most relevant (None: keep all, reordered).")
        max_candidates: int = Field(
            100, ge=1, le=1000, description="Rerank only the best N by current score; the rest are dropped."
        )
        base_url: str | None = Field(
            None, description="API base URL (default: VOYAGE_BASE_URL or the public API). Not settable in an HTTP request's overrides.",
            json_schema_extra=SERVER_SIDE,
        )
        api_key_env: str = Field(
            "VOYAGE_API_KEY", description="NAME of the environment variable holding the key. Not settable in an HTTP request's overrides.",
            json_schema_extra=SERVER_SIDE,
        )
        timeout: float = Field(30.0, gt=0.0, le=600.0, description="Seconds per request.")
        max_retries: int = Field(3, ge=0, le=10, description="Retries on 429 / 5xx / timeout, with backoff.")
        backoff_s: float = Field(0.5, ge=0.0, le=60.0, description="First backoff delay; doubles per retry.")

    params: Params

    def _reranker(self) -> _Reranker:
        p = self.params
        return _Reranker(
            VoyageConnection(
                base_url=p.base_url, api_key_env=p.api_key_env, timeout=p.timeout,
                max_retries=p.max_retries, backoff_s=p.backoff_s, prices=dict(VOYAGE_PRICES),
            )
        )

    def run(self, state: QueryState, ctx: StageContext) -> None:
        p = self.params
        ranked = sorted(state.evidence, key=lambda e: -e.score)
        cands = ranked[: p.max_candidates]
        ctx.stats["candidates"] = len(cands)
        ctx.stats["dropped_beyond_candidates"] = len(ranked) - len(cands)
        if not cands:
            state.evidence = []
            return
        rr = self._reranker()
        docs = [strip_internal_tags(e.text) for e in cands]
        top_k = min(p.top_k, len(docs)) if p.top_k else None
        res: Any = rr._call(
            lambda c: c.rerank(state.question, docs, model=p.model, top_k=top_k, truncation=True),
            model=p.model, what="rerank", tokens=lambda r: r.total_tokens,
        )
        out = []
        for r in res.results:
            ev = cands[r.index]
            out.append(
                ev.model_copy(
                    update={
                        "score": float(r.relevance_score),
                        "metadata": {**ev.metadata, "pre_rerank_score": ev.score},
                    }
                )
            )
        out.sort(key=lambda e: -e.score)
        state.evidence = out
        u = rr.usage.data
        ctx.add_tokens(prompt=int(u["tokens"]), cost_usd=float(u["cost_usd"]))
        ctx.stats["kept"] = len(out)
        ctx.stats["retries"] = int(u["retries"])

    async def arun(self, state: QueryState, ctx: StageContext) -> None:
        """Network-bound: run in a worker thread so parallel branches keep going."""
        await asyncio.to_thread(self.run, state, ctx)


@hookimpl
def register_denoisers() -> list[type[Stage]]:
    return [VoyageRerank]
