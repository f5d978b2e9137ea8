"""Route 5 passage tier (HippoRAG 2): passage seeds in the teleport vector, passages ranked
by their own PPR mass. Graph tests run on the real embedded store."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from graphroute.core.api.models import Edge, EdgeType, Label, Node, Seed, SeedArray
from graphroute.core.api.stage import QueryState, StageContext
from graphroute.core.api.store import GraphStore
from graphroute.core.engine import open_store
from graphroute.core.query.services import Services
from graphroute.plugins.baselines.lexical import BM25Search, lead
from graphroute.plugins.expanders.graph import PPR, PPRPassages
from graphroute.plugins.seeds.tiers import PASSAGE_TIER, PassageSeeds, UnifiedSeeds, unify

GROUP = "g"


def ent_seed(node: str, w: float, tier: str) -> Seed:
    return Seed(name=node, node_id=f"ent:{node}", weight=w, tier=tier)


@pytest.mark.parametrize("as_array", [False, True], ids=["records", "array"])
def test_passage_tier_is_normalised_and_weighted_beside_the_three_tiers(as_array: bool) -> None:
    seeds = [ent_seed("a", 2.0, "entity")]
    arrays = []
    if as_array:
        arrays = [SeedArray(("c1", "c2"), np.array([0.6, 0.2]), PASSAGE_TIER)]
    else:
        seeds += [Seed(name="c1", node_id="c1", weight=0.6, tier=PASSAGE_TIER), Seed(name="c2", node_id="c2", weight=0.2, tier=PASSAGE_TIER)]
    records, out_arrays = unify(seeds, {"entity": 0.5, "structural": 0.3, "thematic": 0.2, PASSAGE_TIER: 0.5}, arrays)
    w = {s.node_id: s.weight for s in [*records, *(s for a in out_arrays for s in a.records())]}
    # entity tier alone holds its 0.5 (plus nothing else present), passages share 0.5 by 3:1
    assert w["ent:a"] == pytest.approx(0.5 / 1.0)
    assert w["c1"] == pytest.approx(0.5 * 0.75 / 1.0) and w["c2"] == pytest.approx(0.5 * 0.25 / 1.0)
    # passages keep the shape they came in
    assert [s.node_id for s in records] == (["ent:a"] if as_array else ["ent:a", "c1", "c2"])


def _ctx(store: GraphStore | None = None) -> StageContext:
    services = Services(store, GROUP) if store is not None else Services.__new__(Services)
    return StageContext(services=services, stage_id="t")


@pytest.mark.parametrize("as_array", [False, True], ids=["records", "array"])
def test_unified_seeds_ignores_passage_seeds_unless_weighted(as_array: bool) -> None:
    def state() -> QueryState:
        st = QueryState("q", GROUP)
        st.tier_weights = {"w1": 0.5, "w2": 0.3, "w3": 0.2}
        st.seeds = [ent_seed("a", 1, "entity")]
        if as_array:
            st.seed_arrays = [SeedArray(("c1",), np.array([0.9]), PASSAGE_TIER)]
        else:
            st.seeds.append(Seed(name="c1", node_id="c1", weight=0.9, tier=PASSAGE_TIER))
        return st

    off = state()
    UnifiedSeeds().run(off, _ctx())
    assert [s.node_id for s in off.all_seeds()] == ["ent:a"]  # default w_passage 0: behaviour unchanged
    on = state()
    c = _ctx()
    UnifiedSeeds(UnifiedSeeds.Params(w_passage=1.0)).run(on, c)
    got = {s.node_id: s.weight for s in on.all_seeds()}
    assert got == pytest.approx({"ent:a": 0.5, "c1": 0.5})
    assert c.stats["passage_tier"]["count"] == 1 and set(c.stats["tiers"]) == {"entity", "structural", "thematic"}
    assert c.stats["passage_tier"]["seeds"] == [{"name": "c1", "node": "c1", "weight": 1.0}]
    assert c.stats["unified_seeds"] == 2 and [t["name"] for t in c.stats["top"]] == ["c1", "a"]  # equal weights: by node id
    # the passage weight does not change the damping formula's w1
    assert on.damping == pytest.approx(0.70 + 0.20 * 1.0)  # all of w2, w3 handed to the entity tier


@pytest.fixture
def store(tmp_path: Path) -> Iterator[GraphStore]:
    s = open_store(str(tmp_path / "store"))
    yield s
    s.close()


def _chunk(cid: str, text: str) -> Node:
    return Node(id=cid, label=Label.CHUNK, group=GROUP, doc_id=f"d-{cid}", props={"text": text, "title": cid.upper()})


def two_documents(store: GraphStore) -> None:
    """c1 mentions p; c2 mentions p and q; c3 mentions q only; r - q are co-occurring."""
    ents = [Node(id=f"ent:{n}", label=Label.ENTITY, group=GROUP, props={"name": n.upper()}) for n in "pqr"]
    store.write(
        GROUP,
        nodes=[*ents, _chunk("c1", "P."), _chunk("c2", "P and Q."), _chunk("c3", "Q.")],
        edges=[
            Edge(src="c1", dst="ent:p", type=EdgeType.MENTIONS, group=GROUP),
            Edge(src="c2", dst="ent:p", type=EdgeType.MENTIONS, group=GROUP),
            Edge(src="c2", dst="ent:q", type=EdgeType.MENTIONS, group=GROUP),
            Edge(src="c3", dst="ent:q", type=EdgeType.MENTIONS, group=GROUP),
            Edge(src="ent:q", dst="ent:r", type=EdgeType.CO_OCCURS, group=GROUP),
        ],
    )


def ranked_passages(store: GraphStore, seeds: list[Seed], top_k: int = 3) -> list[str]:
    st = QueryState("q", GROUP)
    st.seeds = seeds
    PPR(PPR.Params(budget=1.0)).run(st, _ctx(store))
    c = _ctx(store)
    PPRPassages(PPRPassages.Params(top_k=top_k)).run(st, c)
    assert all(e.kind == "chunk" and e.source == "ppr" and e.metadata["ranking"] == "ppr_mass" for e in st.evidence)
    scores = [e.score for e in st.evidence]
    assert scores == sorted(scores, reverse=True)
    return [e.id for e in st.evidence]


def test_passages_are_ranked_by_their_own_ppr_mass(store: GraphStore) -> None:
    two_documents(store)
    # seeding p: the chunks mentioning p come first, c3 (q only) last
    order = ranked_passages(store, [Seed(name="p", node_id="ent:p")])
    assert set(order[:2]) == {"c1", "c2"} and order[2] == "c3"
    # a passage seed on c3 moves it to the front
    order = ranked_passages(store, [Seed(name="p", node_id="ent:p", weight=0.2), Seed(name="c3", node_id="c3", weight=0.8, tier=PASSAGE_TIER)])
    assert order[0] == "c3"
    assert ranked_passages(store, [Seed(name="p", node_id="ent:p")], top_k=1) != ["c3"]
    assert len(ranked_passages(store, [Seed(name="p", node_id="ent:p")], top_k=2)) == 2


class _FixedQuery(StageContext):
    """The stage under test reads the query vector; here it is a given unit vector, so the
    test checks which stored chunk vectors become seeds, not the embedding model."""

    vector: np.ndarray = np.zeros(0)

    def query_vector(self, text: str) -> np.ndarray:
        return self.vector


def test_passage_seeds_take_the_best_chunk_hits_with_their_cosines(store: GraphStore) -> None:
    two_documents(store)
    vecs = np.eye(4, dtype=np.float32)[:3]
    vecs[1] = np.array([0.8, 0.6, 0, 0], dtype=np.float32)
    store.write(GROUP, nodes=[], edges=[], vectors={"chunk": (["c1", "c2", "c3"], vecs)})
    st = QueryState("q", GROUP)
    c = _FixedQuery(services=Services(store, GROUP), stage_id="t")
    c.vector = np.array([1, 0, 0, 0], dtype=np.float32)
    PassageSeeds(PassageSeeds.Params(top_k=2)).run(st, c)
    assert [(s.node_id, s.tier) for s in st.all_seeds()] == [("c1", PASSAGE_TIER), ("c2", PASSAGE_TIER)]
    assert [s.weight for s in st.all_seeds()] == pytest.approx([1.0, 0.8], abs=1e-5)
    st2 = QueryState("q", GROUP)
    PassageSeeds(PassageSeeds.Params(top_k=3, min_score=0.5)).run(st2, c)
    assert [s.node_id for s in st2.all_seeds()] == ["c1", "c2"]  # c3 (cosine 0) does not seed


def test_bm25_passage_seeds_take_the_chunks_sharing_the_questions_rare_words(store: GraphStore) -> None:
    store.write(GROUP, nodes=[
        _chunk("c1", "A Stillwater outage page is acknowledged within five minutes."),
        _chunk("c2", "Every page is acknowledged by the on-call engineer."),
        _chunk("c3", "Expenses are approved by a line manager."),
    ], edges=[])
    raw = QueryState("How fast is a Stillwater page acknowledged?", GROUP)
    PassageSeeds(PassageSeeds.Params(top_k=10, source="bm25")).run(raw, _ctx(store))
    seeds = raw.all_seeds()
    # c3 shares no word with the question: not a hit; the rare "Stillwater" puts c1 first
    assert [(s.node_id, s.tier, s.strategy) for s in seeds] == [("c1", PASSAGE_TIER, "bm25"), ("c2", PASSAGE_TIER, "bm25")]
    assert seeds[0].weight > seeds[1].weight > 0
    scaled = QueryState(raw.question, GROUP)
    PassageSeeds(PassageSeeds.Params(top_k=10, source="bm25", normalize="minmax")).run(scaled, _ctx(store))
    assert [(s.node_id, s.weight) for s in scaled.all_seeds()] == [("c1", 1.0)]  # the lowest hit scales to 0
    # a dense and a BM25 passage seed on one chunk add up in the passage tier (CombSUM)
    st = QueryState("q", GROUP)
    st.tier_weights = {"w1": 1.0, "w2": 0.0, "w3": 0.0}
    st.seeds = [ent_seed("a", 1, "entity")]
    st.seed_arrays = [SeedArray(("c1", "c2"), np.array([1.0, 1.0]), PASSAGE_TIER, "chunk_vector"),
                      SeedArray(("c1",), np.array([1.0]), PASSAGE_TIER, "bm25")]
    UnifiedSeeds(UnifiedSeeds.Params(w_passage=1.0)).run(st, _ctx())
    got = {s.node_id: s.weight for s in st.all_seeds()}
    assert got == pytest.approx({"ent:a": 0.5, "c1": 1 / 3, "c2": 1 / 6})


def _lead_corpus(store: GraphStore) -> None:
    """c1 alone names "Stillwater"; c2-c7 share only the common words "page" / "acknowledged"."""
    store.write(GROUP, nodes=[
        _chunk("c1", "A Stillwater outage page is acknowledged within five minutes."),
        *(_chunk(f"c{i}", f"Every page of kind {i} is acknowledged by the on-call engineer.") for i in range(2, 8)),
    ], edges=[])


def test_bm25_lead_is_the_best_score_over_the_score_at_the_rank() -> None:
    assert lead([6.0, 4.0, 3.0, 2.0, 1.5], 5) == pytest.approx(4.0)
    assert lead([6.0, 5.0, 5.0, 5.0, 5.0], 5) == pytest.approx(1.2)
    # fewer hits than the rank, or a zero there: nothing competes with the best hit
    assert lead([6.0, 4.0], 5) == float("inf") and lead([6.0, 4.0, 0.0], 3) == float("inf")
    assert lead([], 5) == 0.0 and lead([0.0, 0.0], 2) == 0.0


def test_bm25_passage_seeds_are_withheld_when_the_ranking_is_flat(store: GraphStore) -> None:
    _lead_corpus(store)

    def seeds(question: str, min_lead: float) -> tuple[list[str], dict[str, object]]:
        st, ctx = QueryState(question, GROUP), _ctx(store)
        PassageSeeds(PassageSeeds.Params(top_k=3, source="bm25", min_lead=min_lead, lead_rank=5)).run(st, ctx)
        return [s.node_id or "" for s in st.all_seeds()], ctx.stats

    # the rare name puts c1 far ahead of the fifth hit: it seeds
    rare, stats = seeds("When is a Stillwater page acknowledged?", 1.5)
    assert rare[0] == "c1" and len(rare) == 3 and stats["withheld"] is False and float(str(stats["lead"])) >= 1.5
    # common words alone: six passages score alike, so BM25's order is no evidence
    flat, stats = seeds("When is a page acknowledged?", 1.5)
    assert flat == [] and stats["withheld"] is True and float(str(stats["lead"])) < 1.5
    # min_lead 1 (the default) never withholds
    assert len(seeds("When is a page acknowledged?", 1.0)[0]) == 3


def test_bm25_stage_withholds_a_flat_ranking_and_says_so(store: GraphStore) -> None:
    _lead_corpus(store)

    def run(question: str) -> tuple[list[str], dict[str, object]]:
        st, ctx = QueryState(question, GROUP), _ctx(store)
        BM25Search(BM25Search.Params(top_k=3, min_lead=1.5, lead_rank=5)).run(st, ctx)
        return [e.id for e in st.evidence], ctx.stats

    hits, stats = run("When is a Stillwater page acknowledged?")
    assert hits[0] == "c1" and len(hits) == 3 and stats["withheld"] is False
    hits, stats = run("When is a page acknowledged?")
    assert hits == [] and stats["withheld"] is True and stats["hits"] == 0
