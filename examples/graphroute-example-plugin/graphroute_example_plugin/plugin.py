"""A denoiser that drops short evidence: the smallest useful third-party stage.

Use it in a route::

    - use: min_length
      with: {min_chars: 40}
"""

from __future__ import annotations

from graphroute.core import QueryState, Slot, Stage, StageContext, StageKind, StageParams, hookimpl
from pydantic import Field


class MinLength(Stage):
    """Drop evidence whose text is shorter than `min_chars` characters."""

    name = "min_length"
    kind = StageKind.DENOISER
    consumes = (Slot.EVIDENCE,)
    produces = (Slot.EVIDENCE,)

    class Params(StageParams):
        min_chars: int = Field(40, ge=0, description="evidence shorter than this is dropped")

    def run(self, state: QueryState, ctx: StageContext) -> None:
        before = len(state.evidence)
        state.evidence = [e for e in state.evidence if len(e.text) >= self.params.min_chars]
        ctx.stats["dropped"] = before - len(state.evidence)


@hookimpl
def register_denoisers() -> list[type[Stage]]:
    return [MinLength]
