"""seed_blocklist (generic names, hub entities) and grounding (document id, known source
type, mixed-source penalty) on the real embedded store of the LLM tests' corpus."""

from __future__ import annotations

import numpy as np
import pytest
from graphroute.core.api.models import Evidence, Label, Seed
from graphroute.core.api.stage import QueryState, StageContext
from graphroute.core.engine import GraphRoute
from graphroute.plugins.denoisers.grounding import Grounding
from graphroute.plugins.seeds.blocklist import SeedBlocklist, entity_degrees

from tests.llm.conftest import GROUP


def _run(stage: SeedBlocklist | Grounding, state: QueryState, indexed: GraphRoute) -> StageContext:
    ctx = StageContext(services=indexed.services(GROUP), stage_id=stage.name)
    stage.run(state, ctx)
    return ctx


@pytest.fixture()
def by_degree(indexed: GraphRoute) -> list[tuple[str, int]]:
    """The corpus's entities, most connected first."""
    degrees, _ = entity_degrees(indexed.store, GROUP)
    return sorted(degrees.items(), key=lambda kv: (-kv[1], kv[0]))


def _seeds(*ids: str, tier: str = "entity") -> list[Seed]:
    return [Seed(name=i.removeprefix("ent:").title(), node_id=i, weight=1.0, tier=tier) for i in ids]


def test_blocklist_names_match_the_question_name_or_the_entity(indexed: GraphRoute) -> None:
    state = QueryState("q", GROUP, seeds=[*_seeds("ent:danzig", "ent:mercury"), Seed("Baikal", "ent:lake baikal")])
    ctx = _run(SeedBlocklist(SeedBlocklist.Params(names=["DANZIG", "lake"])), state, indexed)
    assert [s.node_id for s in state.seeds] == ["ent:mercury", "ent:lake baikal"]  # "lake" is neither name
    assert ctx.stats["blocked"] == [{"name": "Danzig", "node": "ent:danzig", "reason": "list"}]
    state = QueryState("q", GROUP, seeds=[Seed("the lake", "ent:lake baikal"), *_seeds("ent:mercury")])
    _run(SeedBlocklist(SeedBlocklist.Params(names=["Lake"])), state, indexed)
    assert [s.node_id for s in state.seeds] == ["ent:mercury"]  # the question's name was "the lake"


def test_blocklist_hub_rule_drops_entities_above_the_percentile(indexed: GraphRoute, by_degree: list[tuple[str, int]]) -> None:
    hub, low = by_degree[0][0], by_degree[-1][0]
    assert by_degree[0][1] > by_degree[-1][1]
    state = QueryState("q", GROUP, seeds=[*_seeds(hub, low), *_seeds("sec:1", tier="structural")])
    ctx = _run(SeedBlocklist(SeedBlocklist.Params(max_percentile=95, min_entities=1)), state, indexed)
    assert [s.node_id for s in state.seeds] == [low, "sec:1"]  # other tiers are left alone
    degrees = [d for _, d in by_degree]
    assert ctx.stats["threshold"] == pytest.approx(float(np.percentile(degrees, 95)))
    assert ctx.stats["blocked"][0]["node"] == hub and ctx.stats["blocked"][0]["reason"].startswith("degree ")
    # too few entities for the rule: nothing happens
    state = QueryState("q", GROUP, seeds=_seeds(hub, low))
    ctx = _run(SeedBlocklist(SeedBlocklist.Params(max_percentile=95, min_entities=len(by_degree) + 1)), state, indexed)
    assert len(state.seeds) == 2 and ctx.stats["threshold"] is None


def test_blocklist_keeps_the_least_generic_seed_and_can_downweight(indexed: GraphRoute, by_degree: list[tuple[str, int]]) -> None:
    a, b = by_degree[0][0], by_degree[1][0]
    state = QueryState("q", GROUP, seeds=_seeds(a, b))
    _run(SeedBlocklist(SeedBlocklist.Params(names=[a.removeprefix("ent:"), b.removeprefix("ent:")])), state, indexed)
    assert [s.node_id for s in state.seeds] == [b]  # every seed blocked: the less connected one stays
    state = QueryState("q", GROUP, seeds=_seeds(a, b))
    _run(SeedBlocklist(SeedBlocklist.Params(names=[a.removeprefix("ent:")], action="downweight", factor=0.25)), state, indexed)
    assert [(s.node_id, s.weight) for s in state.seeds] == [(a, 0.25), (b, 1.0)]


def test_blocklist_in_a_route_applies_to_offline_seeds(indexed: GraphRoute, tmp_path: object) -> None:
    from pathlib import Path

    path = Path(str(tmp_path)) / "r.yaml"
    path.write_text("name: r\nextends: route2_reference\nstages:\n  - use: seed_blocklist\n    after: seed_resolution\n"
                    "    with: {names: [Johannes Hevelius]}\n", encoding="utf-8")
    r = indexed.query("On which sea coast is the city where Johannes Hevelius worked?", route=str(path))
    trace = {t.stage: t for t in r.trace}
    assert trace["ner_seeds"].stats["mode"] == "offline"
    assert [b["node"] for b in trace["seed_blocklist"].stats["blocked"]] == ["ent:johannes hevelius"]
    assert trace["seed_blocklist"].items_out == trace["seed_blocklist"].items_in - 1


def test_grounding_fills_or_drops_documentless_evidence_and_unknown_sources(indexed: GraphRoute) -> None:
    node = next(iter(indexed.store.iter_nodes(GROUP, Label.SENTENCE)))
    ev = [
        Evidence(id=node.id, text="a", score=0.9, kind="sentence", metadata={"source_tag": "paragraph"}),
        Evidence(id="nowhere", text="b", score=0.8, kind="chunk"),
        Evidence(id="x2", text="c", score=0.7, kind="chunk", document_id="doc-1", metadata={"source_tag": "ocr_noise"}),
        Evidence(id="x3", text="d", score=0.6, kind="chunk", document_id="doc-1"),
    ]
    state = QueryState("q", GROUP, evidence=list(ev))
    ctx = _run(Grounding(), state, indexed)
    assert [e.id for e in state.evidence] == [node.id, "x3"]
    assert state.evidence[0].document_id == node.doc_id and ev[0].document_id == ""  # filled on a copy
    assert ctx.stats["dropped_no_document"] == ["nowhere"] and ctx.stats["dropped_unknown_source"] == ["x2"]
    state = QueryState("q", GROUP, evidence=list(ev))
    _run(Grounding(Grounding.Params(unknown="keep", require_document=False, mixed_penalty=0.0)), state, indexed)
    assert [e.id for e in state.evidence] == [node.id, "nowhere", "x2", "x3"]


def test_grounding_penalises_the_minority_source_type(indexed: GraphRoute) -> None:
    ev = [
        Evidence(id="t1", text="a", score=0.9, kind="sentence", document_id="d", metadata={"source_tag": "paragraph"}),
        Evidence(id="r1", text="b", score=0.8, kind="sentence", document_id="d", metadata={"source_tag": "table_row"}),
        Evidence(id="t2", text="c", score=0.7, kind="chunk", document_id="d"),
    ]
    state = QueryState("q", GROUP, evidence=list(ev))
    ctx = _run(Grounding(Grounding.Params(mixed_penalty=0.25)), state, indexed)
    assert [(e.id, round(e.score, 4)) for e in state.evidence] == [("t1", 0.9), ("t2", 0.7), ("r1", 0.6)]
    assert state.evidence[2].metadata["pre_grounding_score"] == 0.8 and ev[1].score == 0.8
    assert ctx.stats["source_types"] == {"table": 0.8, "text": 1.6} and ctx.stats["penalised"] == 1
    one_type = [e for e in ev if e.id != "r1"]
    state = QueryState("q", GROUP, evidence=list(one_type))
    ctx = _run(Grounding(Grounding.Params(mixed_penalty=0.25)), state, indexed)
    assert state.evidence == one_type and ctx.stats["penalised"] == 0
