"""The grounding constraint (skeleton reference, anti-hallucination strategy 4): every piece
of context must be traceable to a document and come from a known kind of source.

* **Document**: evidence without a document id - after looking it up on the evidence's
  node - cannot be cited to anything, so it is dropped.
* **Source type**: the evidence's content tag (a sentence's ``source_tag``: ``paragraph``,
  ``table_row``) or, without one, its kind (``chunk``, ``paragraph``, ``sentence``) maps to a
  source type (``text``, ``table``); an unknown tag is dropped (or kept, by parameter).
* **Mixed sources**: when the evidence mixes source types, the types other than the
  dominant one (the most score mass) are penalised, since a context that mixes prose with
  table rows is harder for a model to read coherently; the evidence is then re-ranked.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Literal

from graphroute.core.api.models import Evidence
from graphroute.core.api.stage import QueryState, Slot, Stage, StageContext, StageKind, StageParams
from graphroute.core.hookspecs import hookimpl
from pydantic import Field

DEFAULT_SOURCE_TYPES: dict[str, str] = {
    "paragraph": "text",
    "sentence": "text",
    "chunk": "text",
    "section": "text",
    "table_row": "table",
    "table": "table",
}


def source_tag(e: Evidence) -> str:
    """What an evidence's text was extracted as: the sentence's content tag, else its kind."""
    tag = e.metadata.get("source_tag")
    return str(tag) if tag else e.kind


class Grounding(Stage):
    """Keep evidence that has a document and a known source type; penalise mixed-source contexts."""

    name = "grounding"
    kind = StageKind.DENOISER
    consumes = (Slot.EVIDENCE,)
    produces = (Slot.EVIDENCE,)

    class Params(StageParams):
        require_document: bool = Field(
            True, description="Drop evidence without a document id (looked up on its node first)."
        )
        source_types: dict[str, str] = Field(
            default_factory=lambda: dict(DEFAULT_SOURCE_TYPES),
            description="Known source tags (a sentence's content tag, else the evidence kind) -> source type.",
        )
        unknown: Literal["drop", "keep"] = Field("drop", description="Evidence whose tag is not in `source_types`.")
        mixed_penalty: float = Field(
            0.2, ge=0.0, lt=1.0,
            description="When the evidence mixes source types, scores of the types other than the dominant one "
            "(most score mass) are multiplied by 1 - penalty (0: no penalty).",
        )

    params: Params

    def run(self, state: QueryState, ctx: StageContext) -> None:
        p = self.params
        evidence = list(state.evidence)
        missing = [e.id for e in evidence if not e.document_id]
        owners: dict[str, str] = {}
        if missing:
            owners = {n.id: n.doc_id for n in ctx.services.store.get_nodes(state.group, missing) if n.doc_id}
        kept: list[Evidence] = []
        no_document: list[str] = []
        unknown: list[str] = []
        types: dict[str, str] = {}
        for e in evidence:
            if not e.document_id and e.id in owners:
                e = e.model_copy(update={"document_id": owners[e.id]})
            if p.require_document and not e.document_id:
                no_document.append(e.id)
                continue
            t = p.source_types.get(source_tag(e))
            if t is None:
                if p.unknown == "drop":
                    unknown.append(e.id)
                    continue
                t = source_tag(e)
            types[e.id] = t
            kept.append(e)
        mass: dict[str, float] = defaultdict(float)
        for e in kept:
            mass[types[e.id]] += max(e.score, 0.0)
        penalised = 0
        if len(mass) > 1 and p.mixed_penalty > 0:
            dominant = max(mass, key=lambda t: (mass[t], t))
            out: list[Evidence] = []
            for e in kept:
                if types[e.id] != dominant:
                    e = e.detached()
                    e.metadata["pre_grounding_score"] = e.score
                    e.score *= 1.0 - p.mixed_penalty
                    penalised += 1
                out.append(e)
            kept = sorted(out, key=lambda e: -e.score)  # stable: equal scores keep their order
        state.evidence = kept
        ctx.stats.update(
            {
                "dropped_no_document": no_document,
                "dropped_unknown_source": unknown,
                "document_ids_filled": len(owners),
                "source_types": {t: round(m, 4) for t, m in sorted(mass.items())},
                "penalised": penalised,
            }
        )


@hookimpl
def register_denoisers() -> list[type[Stage]]:
    return [Grounding]
