"""Tiny stages for testing the engine itself (registered through a test plugin object,
exactly like a third-party plugin)."""

from __future__ import annotations

import asyncio

from graphroute.core import (
    Evidence,
    QueryState,
    Slot,
    Stage,
    StageContext,
    StageKind,
    StageParams,
    hookimpl,
)
from pydantic import Field


class FixedEvidence(Stage):
    """Emit `n` evidence records with descending scores (a deterministic expander)."""

    name = "t_fixed"
    kind = StageKind.EXPANDER
    produces = (Slot.EVIDENCE,)

    class Params(StageParams):
        n: int = Field(5, ge=0)
        prefix: str = "e"
        start: float = 1.0

    params: Params

    def run(self, state: QueryState, ctx: StageContext) -> None:
        for i in range(self.params.n):
            state.evidence.append(
                Evidence(id=f"{self.params.prefix}{i}", text=f"text {self.params.prefix}{i} " * (i + 1),
                         score=self.params.start - i * 0.1, document=f"doc{i}")
            )
        ctx.stats["emitted"] = self.params.n


class KeepTop(Stage):
    """Keep the best `n` evidence records."""

    name = "t_keep"
    kind = StageKind.DENOISER
    consumes = (Slot.EVIDENCE,)
    produces = (Slot.EVIDENCE,)

    class Params(StageParams):
        n: int = Field(3, ge=1)
        threshold: float = Field(0.0, ge=0.0, le=1.0)

    params: Params

    def run(self, state: QueryState, ctx: StageContext) -> None:
        before = len(state.evidence)
        state.evidence = sorted(state.evidence, key=lambda e: -e.score)[: self.params.n]
        state.evidence = [e for e in state.evidence if e.score >= self.params.threshold]
        ctx.stats["dropped"] = before - len(state.evidence)


class Echo(Stage):
    """Answer with the ids of the evidence (a deterministic synthesizer)."""

    name = "t_echo"
    kind = StageKind.SYNTHESIZER
    consumes = (Slot.EVIDENCE,)
    produces = (Slot.ANSWER,)

    def run(self, state: QueryState, ctx: StageContext) -> None:
        state.answer = " ".join(e.id for e in state.evidence) or "none"
        ctx.add_tokens(prompt=7, completion=3)


LOOPS: list[asyncio.AbstractEventLoop] = []  # every loop WhichLoop ran on, in order
PENDING: list[asyncio.Task[None]] = []  # tasks a failing WhichLoop left behind


class WhichLoop(Stage):
    """Record the event loop it runs on (in ``LOOPS``); raise when the question is "boom"."""

    name = "t_loop"
    kind = StageKind.EXPANDER
    consumes = (Slot.QUERY,)
    produces = (Slot.EVIDENCE,)

    async def arun(self, state: QueryState, ctx: StageContext) -> None:
        loop = asyncio.get_running_loop()
        LOOPS.append(loop)
        if state.question == "boom":
            PENDING.append(loop.create_task(asyncio.sleep(3600)))  # left pending by the failure
            raise RuntimeError("boom")

    def run(self, state: QueryState, ctx: StageContext) -> None:  # arun is the entry point
        raise NotImplementedError


THREADED: list[str] = []


class InThread(Stage):
    """Runs in a worker thread, as network-bound stages do."""

    name = "t_thread"
    kind = StageKind.EXPANDER
    consumes = (Slot.QUERY,)
    produces = (Slot.EVIDENCE,)

    async def arun(self, state: QueryState, ctx: StageContext) -> None:
        await asyncio.to_thread(self.run, state, ctx)

    def run(self, state: QueryState, ctx: StageContext) -> None:
        THREADED.append(state.question)


class NeedsLimit(Stage):
    """A stage with a parameter that has no default: a route must set it."""

    name = "t_required"
    kind = StageKind.EXPANDER
    consumes = (Slot.QUERY,)
    produces = (Slot.EVIDENCE,)

    class Params(StageParams):
        limit: int

    def run(self, state: QueryState, ctx: StageContext) -> None:
        pass


@hookimpl
def register_expanders() -> list[type[Stage]]:
    return [FixedEvidence, WhichLoop, InThread, NeedsLimit]


@hookimpl
def register_denoisers() -> list[type[Stage]]:
    return [KeepTop]


@hookimpl
def register_synthesizers() -> list[type[Stage]]:
    return [Echo]
