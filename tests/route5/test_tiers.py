"""Route 5: tier normalisation, weight redistribution, damping, profile selection."""

from __future__ import annotations

from pathlib import Path

import pytest
from graphroute.core.api.models import Edge, EdgeType, Label, Node, Seed
from graphroute.core.api.stage import QueryState, StageContext
from graphroute.core.engine import open_store
from graphroute.plugins.seeds.tiers import (
    DEFAULT_PROFILES,
    Profile,
    UnifiedSeeds,
    WeightProfile,
    aggregate_sections,
    classify,
    damping_for,
    redistribute,
    section_entities,
    section_of_chunks,
    spread,
    unify,
)


def seed(node: str, w: float, tier: str) -> Seed:
    return Seed(name=node, node_id=f"ent:{node}", weight=w, tier=tier)


def test_tiers_are_normalised_then_weighted() -> None:
    seeds = [
        seed("a", 1.0, "entity"), seed("b", 3.0, "entity"),  # tier mass 4 -> 0.25 / 0.75 of w1
        seed("c", 10.0, "structural"),  # a single seed takes all of w2, whatever its raw size
        seed("a", 1.0, "thematic"), seed("d", 1.0, "thematic"),
    ]
    out = {s.node_id: s.weight for s in unify(seeds, {"entity": 0.5, "structural": 0.3, "thematic": 0.2})[0]}
    assert out["ent:a"] == pytest.approx(0.5 * 0.25 + 0.2 * 0.5)
    assert out["ent:b"] == pytest.approx(0.5 * 0.75)
    assert out["ent:c"] == pytest.approx(0.3)
    assert out["ent:d"] == pytest.approx(0.1)
    assert sum(out.values()) == pytest.approx(1.0)


def test_unify_renormalises_when_weights_do_not_sum_to_one() -> None:
    out, arrays = unify([seed("a", 1, "entity"), seed("b", 1, "thematic")], {"entity": 0.6, "structural": 0.3, "thematic": 0.1})
    assert arrays == []
    w = {s.node_id: s.weight for s in out}
    assert w["ent:a"] == pytest.approx(0.6 / 0.7) and sum(w.values()) == pytest.approx(1.0)
    assert out[0].tier == "entity"


def test_empty_structural_tier_hands_weight_to_thematic() -> None:
    eff = redistribute({"entity": 0.5, "structural": 0.3, "thematic": 0.2}, {"entity": True, "structural": False, "thematic": True})
    assert eff == pytest.approx({"entity": 0.5, "structural": 0.0, "thematic": 0.5})


def test_empty_thematic_wraps_to_entity_and_empty_entity_goes_to_structural() -> None:
    w = {"entity": 0.6, "structural": 0.3, "thematic": 0.1}
    assert redistribute(w, {"entity": True, "structural": True, "thematic": False}) == pytest.approx(
        {"entity": 0.7, "structural": 0.3, "thematic": 0.0})
    assert redistribute(w, {"entity": False, "structural": True, "thematic": True}) == pytest.approx(
        {"entity": 0.0, "structural": 0.9, "thematic": 0.1})
    # two empty tiers: everything ends on the one left
    assert redistribute(w, {"entity": False, "structural": False, "thematic": True}) == pytest.approx(
        {"entity": 0.0, "structural": 0.0, "thematic": 1.0})
    assert redistribute(w, {}) == {"entity": 0.0, "structural": 0.0, "thematic": 0.0}


@pytest.mark.parametrize(("w1", "damping"), [(0.6, 0.82), (0.1, 0.72), (0.5, 0.80), (0.0, 0.70), (1.0, 0.90)])
def test_damping_formula(w1: float, damping: float) -> None:
    assert damping_for(w1) == pytest.approx(damping)


def _ctx() -> StageContext:
    from graphroute.core.query.services import Services

    return StageContext(services=Services.__new__(Services), stage_id="t")


def test_unified_stage_uses_effective_w1_for_damping_and_reports_tiers() -> None:
    st = QueryState("q", "g")
    st.tier_weights = {"w1": 0.6, "w2": 0.3, "w3": 0.1}
    st.profile = "fact_extraction"
    st.seeds = [seed("a", 1, "entity"), seed("t", 1, "thematic")]  # no structural seeds
    c = _ctx()
    UnifiedSeeds().run(st, c)
    assert st.tier_weights == pytest.approx({"w1": 0.6, "w2": 0.0, "w3": 0.4})
    assert st.damping == pytest.approx(0.82)
    assert c.stats["tiers"]["structural"]["effective"] == 0.0 and c.stats["tiers"]["thematic"]["effective"] == 0.4
    assert {s.node_id: round(s.weight, 6) for s in st.seeds} == {"ent:a": 0.6, "ent:t": 0.4}
    # no entity seeds at all: the formula sees w1 = 0 -> the broadest damping
    st2 = QueryState("q", "g")
    st2.tier_weights = {"w1": 0.6, "w2": 0.3, "w3": 0.1}
    st2.seeds = [seed("t", 1, "thematic")]
    UnifiedSeeds().run(st2, _ctx())
    assert st2.damping == pytest.approx(0.70)


def test_fixed_damping_is_kept() -> None:
    st = QueryState("q", "g")
    WeightProfile(WeightProfile.Params(profile="thematic_survey", damping=0.9)).run(st, _ctx())
    assert st.damping == 0.9 and st.tier_weights == {"w1": 0.1, "w2": 0.2, "w3": 0.7}
    st.seeds = [seed("a", 1, "entity")]
    UnifiedSeeds().run(st, _ctx())
    assert st.damping == 0.9


LABELLED = [
    ("Who founded the company Contoso?", "fact_extraction"),
    ("When was the bridge opened to traffic?", "fact_extraction"),
    ("How many floors does the tower have?", "fact_extraction"),
    ("What are the termination provisions of the lease?", "clause_analysis"),
    ("What does the contract say about late payment?", "clause_analysis"),
    ("Compare the fee structures of the two agreements", "cross_doc_comparison"),
    ("How do the warranties differ between the vendors?", "cross_doc_comparison"),
    ("Summarize the recurring themes of these reports", "thematic_survey"),
    ("Give me an overview of the main topics in the collection", "thematic_survey"),
    ("What is the nationality of the director of the film Jaws?", "multi_hop"),
    ("In which city was the founder of the record label born?", "multi_hop"),
]


@pytest.mark.parametrize(("question", "expected"), LABELLED)
def test_profile_selection_by_cues(question: str, expected: str) -> None:
    name, _how = classify(question, DEFAULT_PROFILES, default="multi_hop")
    assert name == expected


def test_no_cue_falls_back_to_similarity_then_default() -> None:
    profiles = {"x": Profile(w1=1, w2=0, w3=0), "y": Profile(w1=0, w2=1, w3=0)}
    assert classify("plain words", profiles, default="y") == ("y", "default")
    assert classify("plain words", profiles, similarity={"x": 0.9, "y": 0.1}, default="y") == ("x", "embedding")


def test_profiles_are_configuration() -> None:
    custom = {"legal": Profile(w1=0.2, w2=0.7, w3=0.1, cues=[r"\blease\b"]), "other": Profile(w1=1, w2=0, w3=0)}
    st = QueryState("What does the lease say?", "g")
    c = _ctx()
    WeightProfile(WeightProfile.Params(profiles=custom, default_profile="other", use_embeddings=False)).run(st, c)
    assert st.profile == "legal" and st.tier_weights == {"w1": 0.2, "w2": 0.7, "w3": 0.1}
    assert st.damping == pytest.approx(0.74) and c.stats["how"] == "cues"


def test_structural_aggregation_needs_min_sentences() -> None:
    hits = [("s1", 0.9), ("s2", 0.8), ("s3", 0.95), ("s4", 0.4), ("s5", 0.3)]
    section = {"s1": "A", "s2": "A", "s3": "B", "s4": "C", "s5": "C"}
    rows = aggregate_sections(hits, section, 2)
    assert [(r[0], r[2]) for r in rows] == [("A", 2), ("C", 2)]  # B's single lucky hit is not enough
    assert rows[0][1] == pytest.approx(1.7)
    assert spread(1.0, {"ent:x": 3, "ent:y": 1, "ent:z": 1}, 2) == pytest.approx({"ent:x": 0.75, "ent:y": 0.25})


def test_section_membership_counts_chunk_mentions_and_follows_writes(tmp_path: Path) -> None:
    """structural_seeds' section -> chunks -> entities counts are read from the store per question:
    sentences in a section and entities mentioned only by sentences do not count, and the
    next write is seen."""
    store = open_store(str(tmp_path / "store"))
    g = "g"

    def node(i: str, label: str) -> Node:
        return Node(id=i, label=label, group=g, props={"name": i})

    def edge(a: str, b: str, t: str) -> Edge:
        return Edge(src=a, dst=b, type=t, group=g)

    store.write(
        g,
        nodes=[node("sec:1", Label.SECTION), node("sec:2", Label.SECTION), node("c1", Label.CHUNK), node("c2", Label.CHUNK),
               node("c3", Label.CHUNK), node("s1", Label.SENTENCE), node("ent:a", Label.ENTITY), node("ent:b", Label.ENTITY)],
        edges=[edge("c1", "sec:1", EdgeType.IN_SECTION), edge("c2", "sec:1", EdgeType.IN_SECTION), edge("c3", "sec:2", EdgeType.IN_SECTION),
               edge("s1", "sec:2", EdgeType.IN_SECTION), edge("c1", "ent:a", EdgeType.MENTIONS), edge("c2", "ent:a", EdgeType.MENTIONS),
               edge("c2", "ent:b", EdgeType.MENTIONS), edge("s1", "ent:b", EdgeType.MENTIONS)],
    )
    assert section_of_chunks(store, g, ["c3", "c1", "nope"]) == {"c3": "sec:2", "c1": "sec:1"}
    assert section_entities(store, g, ["sec:1", "sec:2"]) == {"sec:1": {"ent:a": 2, "ent:b": 1}, "sec:2": {}}
    store.write(g, nodes=[], edges=[edge("c3", "ent:b", EdgeType.MENTIONS)])
    assert section_entities(store, g, ["sec:2"]) == {"sec:2": {"ent:b": 1}}
    store.close()
