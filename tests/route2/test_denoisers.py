"""Each Route 2 denoise rule on small hand-made inputs (route2 reference §6)."""

from __future__ import annotations

import pytest
from graphroute.core.api.models import Evidence, ScoredNode
from graphroute.core.api.stage import QueryState, StageContext
from graphroute.core.query.services import Services
from graphroute.plugins.denoisers.route2 import (
    CommunityFilter,
    Md5Dedup,
    ScoreGap,
    ScoreWeighted,
    SemanticDedup,
    allocate,
    find_score_gap,
    jaccard,
    md5_dedup,
    near_duplicate,
    target_community,
    word_set,
)
from hypothesis import given
from hypothesis import strategies as hs


def ctx() -> StageContext:
    return StageContext(services=Services.__new__(Services), stage_id="t")


def ents(*spec: tuple[str, float, int | None]) -> list[ScoredNode]:
    return [ScoredNode(id=f"ent:{n}", name=n, score=s, community=c) for n, s, c in spec]


def ev(i: str, text: str, score: float, entity: str | None = None) -> Evidence:
    return Evidence(id=i, text=text, score=score, entity=f"ent:{entity}" if entity else None)


# --------------------------------------------------------------------------- md5


def test_md5_keeps_highest_score_and_records_entities() -> None:
    st = QueryState("q", "g")
    st.evidence = [ev("c1", "same text", 0.2, "low"), ev("c2", "other", 0.5, "b"), ev("c1", "same  text", 0.9, "high")]
    c = ctx()
    Md5Dedup().run(st, c)
    assert [e.id for e in st.evidence] == ["c1", "c2"]
    kept = st.evidence[0]
    assert kept.score == 0.9 and kept.entity == "ent:high"
    assert kept.metadata["entities"] == ["ent:low"]
    assert c.stats["duplicates_removed"] == 1 and c.stats["chunks_before"] == 3


def test_md5_never_changes_the_records_it_was_given() -> None:
    """Kept records are copied only when their metadata changes; the caller's never do."""
    given = [ev("c1", "same text", 0.9, "high"), ev("c2", "other", 0.5, "b"), ev("c1", "same text", 0.2, "low"),
             ev("c3", "third", 0.4, "x"), ev("c3", "third", 0.4, "x")]
    before = [e.model_dump() for e in given]
    out, removed = md5_dedup(given)
    assert removed == 2 and [e.id for e in out] == ["c1", "c2", "c3"]
    assert out[0].metadata["entities"] == ["ent:low"] and out[0] is not given[0]
    assert out[1] is given[1]  # nothing to record: passed on as it came
    assert [e.model_dump() for e in given] == before


# --------------------------------------------------------------------------- community filter


def test_target_is_majority_of_top3() -> None:
    e = ents(("a", 1.0, 1), ("b", 0.9, 2), ("c", 0.8, 2), ("d", 0.7, 1), ("e", 0.6, 1))
    assert target_community(e) == 2  # 2 of the top 3, although community 1 has more members overall


def test_target_tie_goes_to_best_ranked() -> None:
    assert target_community(ents(("a", 1.0, 7), ("b", 0.9, 8), ("c", 0.8, 9))) == 7


def test_community_filter_penalises_and_rescores_evidence() -> None:
    st = QueryState("q", "g")
    st.entities = ents(("a", 1.0, 1), ("b", 0.9, 2), ("c", 0.8, 2))
    st.evidence = [ev("x", "x text", 1.0, "a"), ev("y", "y text", 0.8, "c")]
    c = ctx()
    CommunityFilter().run(st, c)
    scores = {e.id: e.score for e in st.entities}
    assert scores["ent:a"] == pytest.approx(0.3)
    assert scores["ent:b"] == 0.9
    assert [e.id for e in st.entities] == ["ent:b", "ent:c", "ent:a"]
    assert {e.id: e.score for e in st.evidence} == {"y": 0.8, "x": pytest.approx(0.3)}
    assert [e.id for e in st.evidence] == ["y", "x"]
    assert c.stats["target_community"] == 2 and c.stats["in_target"] == 2 and c.stats["penalised"] == 1


def test_evidence_takes_best_surviving_entity_after_md5() -> None:
    st = QueryState("q", "g")
    st.entities = ents(("a", 1.0, 1), ("b", 0.9, 2), ("c", 0.8, 2))
    st.evidence = [ev("x", "shared", 1.0, "a"), ev("x", "shared", 0.8, "c")]
    Md5Dedup().run(st, ctx())
    CommunityFilter().run(st, ctx())
    # a was penalised to 0.3, but c (0.8, in target) also brought this text
    assert st.evidence[0].score == 0.8 and st.evidence[0].entity == "ent:c"


# --------------------------------------------------------------------------- score gap


def test_gap_ratio_and_index_follow_the_reference_numbering() -> None:
    scores = [1.0, 0.95, 0.9, 0.88, 0.85, 0.8, 0.78, 0.75, 0.7, 0.3, 0.28]
    found, idx, ratio = find_score_gap(scores, 0.5, 6)
    assert found and idx == 8 and ratio == pytest.approx(1 - 0.3 / 0.7)


def test_min_keep_guard_skips_early_cliff() -> None:
    # the Q-L4 case: a penalty cliff after the 5th entity, nothing after
    scores = [1.0, 0.98, 0.96, 0.94, 0.92, 0.27, 0.26, 0.25, 0.24]
    assert find_score_gap(scores, 0.5, 3)[:2] == (True, 4)
    found, _idx, _ = find_score_gap(scores, 0.5, 6)
    assert not found
    st = QueryState("q", "g")
    st.entities = [ScoredNode(id=f"ent:{i}", score=s) for i, s in enumerate(scores)]
    c = ctx()
    ScoreGap().run(st, c)
    assert len(st.entities) == 9 and c.stats["gap_found"] is False and c.stats["entities_pruned"] == 0


def test_gap_never_keeps_fewer_than_min_keep() -> None:
    scores = [1.0, 0.1, 0.09, 0.08, 0.07, 0.06, 0.01, 0.009]
    found, idx, _ = find_score_gap(scores, 0.5, 6)
    assert found and idx is not None and idx + 1 >= 6


def test_score_gap_removes_pruned_entities_evidence() -> None:
    st = QueryState("q", "g")
    st.entities = [ScoredNode(id=f"ent:{i}", score=s) for i, s in enumerate([1, 0.9, 0.85, 0.8, 0.75, 0.7, 0.2])]
    st.evidence = [ev("keep", "t1", 1.0, "0"), ev("drop", "t2", 0.2, "6"), ev("free", "t3", 0.05)]
    c = ctx()
    ScoreGap().run(st, c)
    assert [e.id for e in st.entities] == [f"ent:{i}" for i in range(6)]
    assert {e.id for e in st.evidence} == {"keep", "free"}  # evidence without an entity is untouched
    assert c.stats == {
        "gap_found": True, "gap_index": 5, "gap_ratio": pytest.approx(round(1 - 0.2 / 0.7, 4)),
        "largest_ratio": pytest.approx(round(1 - 0.2 / 0.7, 4)), "entities_before": 7, "entities_after": 6, "entities_pruned": 1,
    }


def _ppr_like_scores() -> list[ScoredNode]:
    """Smooth raw PPR-like scores: the in-community entities (0) and the off-community ones
    (1) interleave, no relative drop reaches 0.5."""
    spec = [(1.0, 0), (0.92, 0), (0.85, 1), (0.8, 0), (0.74, 1), (0.7, 0), (0.66, 1), (0.62, 0), (0.58, 1), (0.56, 0), (0.54, 1), (0.52, 0)]
    return [ScoredNode(id=f"ent:{i}", score=s, community=c) for i, (s, c) in enumerate(spec)]


def test_ordering_bug_gap_only_appears_after_community_filter() -> None:
    before = QueryState("q", "g")
    before.entities = _ppr_like_scores()
    c1 = ctx()
    ScoreGap().run(before, c1)  # the buggy order: on raw, smooth scores
    assert c1.stats["gap_found"] is False and len(before.entities) == 12

    after = QueryState("q", "g")
    after.entities = _ppr_like_scores()
    CommunityFilter().run(after, ctx())
    c2 = ctx()
    ScoreGap().run(after, c2)  # the fixed order: the 0.3x penalty creates the cliff
    assert c2.stats["gap_found"] is True
    assert {e.community for e in after.entities} == {0}
    assert c2.stats["entities_after"] == 7


# --------------------------------------------------------------------------- score weighted


def test_allocation_formula() -> None:
    alloc = allocate(ents(("a", 1.0, None), ("b", 0.5, None), ("c", 0.01, None)), 12)
    assert alloc == {"ent:a": 12, "ent:b": 6, "ent:c": 1}


@pytest.mark.parametrize("scores", [[0.4, 0.4, 0.4], [0.0, 0.0]])
def test_allocation_uniform_when_scores_equal_or_zero(scores: list[float]) -> None:
    e = [ScoredNode(id=f"ent:{i}", score=s) for i, s in enumerate(scores)]
    assert set(allocate(e, 12).values()) == {12}


def test_score_weighted_trims_per_entity() -> None:
    st = QueryState("q", "g")
    st.entities = ents(("a", 1.0, None), ("b", 0.1, None))
    st.evidence = [ev(f"a{i}", f"a {i}", 1.0, "a") for i in range(5)] + [ev(f"b{i}", f"b {i}", 0.1, "b") for i in range(5)] + [ev("s", "s", 0.5)]
    c = ctx()
    ScoreWeighted(ScoreWeighted.Params(limit=4)).run(st, c)
    # a: 4, b: max(1, round(0.1 * 4)) = 1; entity-less evidence kept
    assert [e.id for e in st.evidence] == ["a0", "a1", "a2", "a3", "b0", "s"]
    assert c.stats["chunks_after"] == 6 and c.stats["uniform"] is False


# --------------------------------------------------------------------------- semantic dedup


def test_jaccard_on_word_sets() -> None:
    assert word_set("The Fee: 5%!") == frozenset({"the", "fee", "5"})
    assert jaccard(word_set("a b c d"), word_set("a b c e")) == pytest.approx(3 / 5)


@given(
    hs.frozensets(hs.integers(0, 40), max_size=40),
    hs.frozensets(hs.integers(0, 40), max_size=40),
    hs.sampled_from([0.01, 0.5, 0.8, 0.92, 0.95, 1.0]) | hs.floats(0.001, 1.0),
)
def test_the_size_bound_never_changes_the_verdict(a: frozenset[int], b: frozenset[int], threshold: float) -> None:
    wa, wb = frozenset(f"w{i}" for i in a), frozenset(f"w{i}" for i in b)
    assert near_duplicate(wa, wb, threshold) == (jaccard(wa, wb) >= threshold)


def test_sets_of_the_same_size_at_the_threshold_are_near_duplicates() -> None:
    # 23 / 25 = 0.92 exactly: the size bound (24 / 24 = 1) must let the Jaccard decide
    a = frozenset(f"w{i}" for i in range(24))
    b = frozenset(f"w{i}" for i in range(1, 25))
    assert jaccard(a, b) == 23 / 25
    assert near_duplicate(a, b, 23 / 25) and not near_duplicate(a, b, 0.93)


def test_semantic_dedup_threshold_and_greedy_by_score() -> None:
    base = " ".join(f"w{i}" for i in range(24))
    near = base + " extra"  # Jaccard 24/25 = 0.96
    far = " ".join(f"w{i}" for i in range(20)) + " z1 z2 z3 z4"  # 20/28 = 0.71
    st = QueryState("q", "g")
    st.evidence = [ev("lo", base, 0.2), ev("hi", near, 0.9), ev("far", far, 0.5)]
    c = ctx()
    SemanticDedup().run(st, c)
    assert [e.id for e in st.evidence] == ["hi", "far"]  # the lower-scored near-duplicate goes
    assert c.stats == {"chunks_before": 3, "chunks_after": 2, "near_duplicates_removed": 1}
    st2 = QueryState("q", "g")
    st2.evidence = [ev("lo", base, 0.2), ev("hi", near, 0.9)]
    SemanticDedup(SemanticDedup.Params(threshold=0.97)).run(st2, ctx())
    assert len(st2.evidence) == 2
