"""Small real stages for the server tests: they read the real embedded store, so a query
through the HTTP API exercises the store, the runner and the route loader end to end."""

from __future__ import annotations

import re
import time

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

WORD = re.compile(r"\w+")


class WordOverlap(Stage):
    """Evidence: the group's sentences ranked by words shared with the question."""

    name = "t_overlap"
    kind = StageKind.EXPANDER
    produces = (Slot.EVIDENCE,)

    class Params(StageParams):
        top_k: int = Field(3, ge=1, le=100, description="sentences kept")

    params: Params

    def run(self, state: QueryState, ctx: StageContext) -> None:
        q = set(WORD.findall(state.question.lower()))
        scored = []
        for node in ctx.services.store.iter_nodes(state.group, "Sentence"):
            text = str(node.props.get("text", ""))
            overlap = len(q & set(WORD.findall(text.lower())))
            if overlap:
                scored.append(Evidence(id=node.id, text=text, score=float(overlap), kind="sentence",
                                       document=str(node.props.get("document", "")), source=self.name))
        state.evidence = sorted(scored, key=lambda e: (-e.score, e.id))[: self.params.top_k]
        ctx.stats["candidates"] = len(scored)


class Sleep(Stage):
    """Sleep, to exercise the server's time limit."""

    name = "t_sleep"
    kind = StageKind.DENOISER
    consumes = (Slot.EVIDENCE,)
    produces = (Slot.EVIDENCE,)

    class Params(StageParams):
        seconds: float = Field(0.0, ge=0.0, le=30.0)

    params: Params

    def run(self, state: QueryState, ctx: StageContext) -> None:
        time.sleep(self.params.seconds)


class Spin(Sleep):
    """Work for ``seconds`` in small steps, checking the query's deadline between them (a
    long loop in a real stage does the same)."""

    name = "t_spin"

    def run(self, state: QueryState, ctx: StageContext) -> None:
        from graphroute.core.lib.deadline import check_deadline

        end = time.monotonic() + self.params.seconds
        steps = 0
        while time.monotonic() < end:
            check_deadline(self.name)
            time.sleep(0.01)
            steps += 1
        ctx.stats["steps"] = steps


class FirstSentence(Stage):
    """Answer with the best evidence text, cited."""

    name = "t_answer"
    kind = StageKind.SYNTHESIZER
    consumes = (Slot.EVIDENCE,)
    produces = (Slot.ANSWER,)

    def run(self, state: QueryState, ctx: StageContext) -> None:
        from graphroute.core import Citation

        if not state.evidence:
            state.answer, state.negative = "Not found.", True
            return
        best = state.evidence[0]
        state.answer = f"{best.text} [1]"
        state.citations = [Citation(index=1, evidence_id=best.id, document=best.document, text=best.text)]


@hookimpl
def register_expanders() -> list[type[Stage]]:
    return [WordOverlap]


@hookimpl
def register_denoisers() -> list[type[Stage]]:
    return [Sleep, Spin]


@hookimpl
def register_synthesizers() -> list[type[Stage]]:
    return [FirstSentence]
