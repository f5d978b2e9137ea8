"""Generic-seed blocklist: the reference's N1 mitigation (route2 denoising §3).

A question's generic words ("agreement", "party", "document") resolve to hub entities that
every document mentions; as PPR seeds they spread the walk over everything those hubs touch.
``seed_blocklist`` runs after seed resolution and removes (or down-weights) such seeds by two
rules:

* **a list** in the route config, compared after name normalisation with both the name
  taken from the question and the entity it resolved to;
* **a data-driven rule**: an entity seed whose degree in the entity graph (or whose number
  of mentions) is above a percentile of the group's entities is a hub, whatever its name.

It reads resolved seeds, so it applies to names from spaCy and from an LLM alike.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Literal

import numpy as np
from graphroute.core.api.models import EdgeType, Seed
from graphroute.core.api.stage import QueryState, Slot, Stage, StageContext, StageKind, StageParams
from graphroute.core.api.store import GraphStore, per_version
from graphroute.core.hookspecs import hookimpl
from graphroute.core.lib.entities import normalize_name
from graphroute.core.lib.graph import adjacency
from pydantic import Field

from .entity_seeds import lexicon

Measure = Literal["degree", "mentions"]


def entity_degrees(store: GraphStore, group: str) -> tuple[dict[str, int], Any]:
    """Degree of every entity in the entity graph (relations, co-occurrence, kNN) and the
    exported view it was counted on, once per store version (the hub rule's percentile is a
    statistic of the whole entity layer)."""
    return per_version(store, group, "entity_degrees", lambda: _entity_degrees(store, group))


def _entity_degrees(store: GraphStore, group: str) -> tuple[dict[str, int], Any]:
    view = adjacency(store, group, {EdgeType.RELATION: 1.0, EdgeType.CO_OCCURS: 1.0, EdgeType.SEMANTICALLY_SIMILAR: 1.0})
    deg = view.matrix.getnnz(axis=1) if len(view) else []
    return {view.ids[i]: int(deg[i]) for i in range(len(view))}, view


def hub_measure(store: GraphStore, group: str, measure: Measure) -> dict[str, int]:
    """entity id -> its degree in the entity graph, or the chunks that mention it."""
    if measure == "degree":
        return entity_degrees(store, group)[0]
    return lexicon(store, group).mentions


def hub_threshold(store: GraphStore, group: str, measure: Measure, percentile: float) -> float:
    """The ``percentile`` of ``measure`` over the group's entities, once per store version."""

    def build() -> float:
        values = np.fromiter(hub_measure(store, group, measure).values(), dtype=np.float64)
        return float(np.percentile(values, percentile)) if values.size else float("inf")

    return per_version(store, group, f"hub_threshold:{measure}:{percentile}", build)


class SeedBlocklist(Stage):
    """Remove generic seeds: names on the route's list, and hub entities above a degree percentile."""

    name = "seed_blocklist"
    kind = StageKind.SEED_SOURCE
    consumes = (Slot.SEEDS,)
    produces = (Slot.SEEDS,)

    class Params(StageParams):
        names: list[str] = Field(
            default_factory=list,
            description="Generic names to drop (normalised before comparing with the question's name and "
            "the resolved entity's), e.g. [agreement, party, document].",
        )
        max_percentile: float | None = Field(
            None, gt=0.0, le=100.0,
            description="Hub rule: drop an entity seed whose `measure` is above this percentile of the "
            "group's entities (e.g. 99.5: the top half percent); null: off.",
        )
        measure: Measure = Field(
            "degree", description="Hub rule: degree in the entity graph, or the chunks mentioning the entity."
        )
        min_entities: int = Field(
            200, ge=1,
            description="Hub rule: only in groups with at least this many entities (a small group has no hubs to speak of).",
        )
        tiers: list[str] = Field(["entity"], min_length=1, description="Seed tiers the stage looks at.")
        action: Literal["drop", "downweight"] = Field("drop", description="Drop a generic seed, or multiply its weight by `factor`.")
        factor: float = Field(0.1, gt=0.0, lt=1.0, description="Weight multiplier of a down-weighted seed.")
        keep_one: bool = Field(
            True,
            description="Never remove every seed of the tiers: the least generic one (lowest measure) stays.",
        )

    params: Params

    def run(self, state: QueryState, ctx: StageContext) -> None:
        p = self.params
        store = ctx.services.store
        blocked_names = {normalize_name(n) for n in p.names} - {""}
        candidates = [s for s in state.seeds if s.tier in p.tiers and s.node_id]
        measure: dict[str, int] = {}
        threshold: float | None = None
        if p.max_percentile is not None and candidates:
            measure = hub_measure(store, state.group, p.measure)
            if len(measure) >= p.min_entities:
                threshold = hub_threshold(store, state.group, p.measure, p.max_percentile)
        hits: dict[int, str] = {}  # id(seed) -> reason
        for s in candidates:
            node = str(s.node_id)
            if blocked_names and (normalize_name(s.name) in blocked_names or node.removeprefix("ent:") in blocked_names):
                hits[id(s)] = "list"
            elif threshold is not None and measure.get(node, 0) > threshold:
                hits[id(s)] = f"{p.measure} {measure.get(node, 0)} > p{p.max_percentile:g} ({threshold:g})"
        if p.keep_one and candidates and len(hits) == len(candidates):
            spared = min(candidates, key=lambda s: (measure.get(str(s.node_id), 0), str(s.node_id)))
            del hits[id(spared)]
        report: list[dict[str, Any]] = []
        out: list[Seed] = []
        for s in state.seeds:
            reason = hits.get(id(s))
            if reason is None:
                out.append(s)
                continue
            report.append({"name": s.name, "node": s.node_id, "reason": reason})
            if p.action == "downweight":
                out.append(replace(s, weight=s.weight * p.factor))
        state.seeds = out
        ctx.stats.update({"blocked": report, "action": p.action, "threshold": threshold})


@hookimpl
def register_seed_sources() -> list[type[Stage]]:
    return [SeedBlocklist]
