"""HippoRAG-style seed weighting options Route 5 turns on: min-max passage seeds, node
specificity, match-score seed weights, and noun phrases only as an NER fallback."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from graphroute.core.api.models import Edge, EdgeType, Label, Node, Seed
from graphroute.core.api.stage import QueryState, StageContext
from graphroute.core.api.store import GraphStore
from graphroute.core.engine import open_store
from graphroute.core.query.services import Services
from graphroute.plugins.seeds.entity_seeds import SeedResolution, offline_names
from graphroute.plugins.seeds.tiers import (
    PASSAGE_TIER,
    PassageSeeds,
    StructuralSeeds,
    ThematicSeeds,
    UnifiedSeeds,
    with_specificity,
)

from .test_passages import GROUP, _FixedQuery, two_documents


@pytest.fixture
def store(tmp_path: Path) -> Iterator[GraphStore]:
    s = open_store(str(tmp_path / "store"))
    yield s
    s.close()


def test_minmax_passage_seeds_separate_the_best_hit_and_drop_the_worst(store: GraphStore) -> None:
    two_documents(store)
    vecs = np.array([[1, 0, 0], [0.8, 0.6, 0], [0.6, 0.8, 0]], dtype=np.float32)
    store.write(GROUP, nodes=[], edges=[], vectors={"chunk": (["c1", "c2", "c3"], vecs)})
    c = _FixedQuery(services=Services(store, GROUP), stage_id="t")
    c.vector = np.array([1, 0, 0], dtype=np.float32)
    raw = QueryState("q", GROUP)
    PassageSeeds(PassageSeeds.Params(top_k=3)).run(raw, c)
    assert [s.weight for s in raw.all_seeds()] == pytest.approx([1.0, 0.8, 0.6], abs=1e-5)
    scaled = QueryState("q", GROUP)
    PassageSeeds(PassageSeeds.Params(top_k=3, normalize="minmax")).run(scaled, c)
    # (s - 0.6) / (1.0 - 0.6): the best hit keeps 1, the weakest gets 0 and seeds nothing
    assert [(s.node_id, round(s.weight, 4)) for s in scaled.all_seeds()] == [("c1", 1.0), ("c2", 0.5)]
    assert scaled.seeds == [] and [a.tier for a in scaled.seed_arrays] == [PASSAGE_TIER]


def test_specificity_divides_entity_seeds_by_their_chunk_count(store: GraphStore) -> None:
    store.write(GROUP, nodes=[
        Node(id="ent:rare", label=Label.ENTITY, group=GROUP, props={"name": "Rare", "chunk_count": 1}),
        Node(id="ent:common", label=Label.ENTITY, group=GROUP, props={"name": "Common", "chunk_count": 40}),
    ], edges=[])
    seeds = [
        Seed(name="Rare", node_id="ent:rare", weight=1.0, tier="entity"),
        Seed(name="Common", node_id="ent:common", weight=1.0, tier="entity"),
        Seed(name="Common", node_id="ent:common", weight=1.0, tier="structural"),  # other tiers untouched
        Seed(name="c1", node_id="c1", weight=1.0, tier=PASSAGE_TIER),
    ]
    out, _ = with_specificity(store, GROUP, seeds)
    assert [s.weight for s in out] == pytest.approx([1.0, 1 / 40, 1.0, 1.0])

    st = QueryState("q", GROUP)
    st.tier_weights = {"w1": 1.0, "w2": 0.0, "w3": 0.0}
    st.seeds = seeds[:2]
    UnifiedSeeds(UnifiedSeeds.Params(specificity=True)).run(st, StageContext(services=Services(store, GROUP), stage_id="u"))
    w = {s.node_id: s.weight for s in st.seeds}
    assert w["ent:rare"] == pytest.approx(40 / 41) and w["ent:common"] == pytest.approx(1 / 41)


def test_weight_by_match_scales_loose_matches_down(store: GraphStore) -> None:
    store.write(GROUP, nodes=[
        Node(id="ent:henrik ibsen", label=Label.ENTITY, group=GROUP, props={"name": "Henrik Ibsen", "norm": "henrik ibsen"}),
        Node(id="ent:debut author", label=Label.ENTITY, group=GROUP, props={"name": "debut author", "norm": "debut author"}),
    ], edges=[])
    ctx = StageContext(services=Services(store, GROUP), stage_id="r")

    def resolve(weighted: bool) -> dict[str, float]:
        st = QueryState("q", GROUP)
        st.seed_names = ["Henrik Ibsen", "author"]
        SeedResolution(SeedResolution.Params(strategies=["exact", "normalized", "substring"], weight_by_match=weighted)).run(st, ctx)
        return {s.node_id or "": s.weight for s in st.seeds}

    assert resolve(False) == {"ent:henrik ibsen": 1.0, "ent:debut author": 1.0}
    # "author" covers 6 of the 12 characters of "debut author"
    assert resolve(True) == pytest.approx({"ent:henrik ibsen": 1.0, "ent:debut author": 0.5})


def test_noun_phrases_only_as_a_fallback() -> None:
    question = "What country was the author of Brand a citizen of?"
    always = offline_names(question)
    assert "Brand" in always and any("author" in n for n in always)
    assert offline_names(question, "fallback") == ["Brand"]
    assert offline_names(question, "never") == ["Brand"]
    # nothing named: the fallback still gives the search somewhere to start
    plain = "what is the boiling point of water at sea level?"
    assert offline_names(plain, "never") == []
    assert offline_names(plain, "fallback") == offline_names(plain, "always") != []


def test_initials_stay_inside_a_name_and_fragments_are_dropped() -> None:
    names = offline_names("In what county is the city where Harris W. Fawell was born?", "never")
    assert names == ["Harris W. Fawell"]  # not "Harris" and "Fawell" beside it
    journal = offline_names("Which association published Journal of Psychotherapy Integration?")
    assert "Journal of Psychotherapy Integration" in journal
    assert not {"Journal", "Psychotherapy Integration"} & set(journal)  # noun-phrase fragments of the name


def _communities(store: GraphStore, docs: list[str]) -> None:
    """comm:wide's members are mentioned in every document given, comm:one's in the first only."""
    nodes = [Node(id=d, label=Label.DOCUMENT, group=GROUP, doc_id=d, props={"title": d}) for d in docs]
    nodes += [Node(id=f"{d}:chk0", label=Label.CHUNK, group=GROUP, doc_id=d, props={"text": d}) for d in docs]
    nodes += [Node(id=f"ent:{n}", label=Label.ENTITY, group=GROUP, props={"name": n, "mention_count": 1}) for n in ("a", "b", "x")]
    nodes += [Node(id=c, label=Label.COMMUNITY, group=GROUP, props={"title": c}) for c in ("comm:wide", "comm:one")]
    edges = [
        Edge(src="ent:a", dst="comm:wide", type=EdgeType.BELONGS_TO, group=GROUP),
        Edge(src="ent:b", dst="comm:wide", type=EdgeType.BELONGS_TO, group=GROUP),
        Edge(src="ent:x", dst="comm:one", type=EdgeType.BELONGS_TO, group=GROUP),
        Edge(src=f"{docs[0]}:chk0", dst="ent:x", type=EdgeType.MENTIONS, group=GROUP, doc_id=docs[0]),
    ]
    edges += [Edge(src=f"{d}:chk0", dst="ent:a" if i % 2 == 0 else "ent:b", type=EdgeType.MENTIONS, group=GROUP, doc_id=d)
              for i, d in enumerate(docs)]
    vecs = np.array([[0.9, 0.1, 0], [0.8, 0.2, 0]], dtype=np.float32)
    store.write(GROUP, nodes=nodes, edges=edges, vectors={"community": (["comm:wide", "comm:one"], vecs)})


def _thematic(store: GraphStore, **params: object) -> tuple[set[str], StageContext]:
    st = QueryState("q", GROUP)
    c = _FixedQuery(services=Services(store, GROUP), stage_id="t")
    c.vector = np.array([1, 0, 0], dtype=np.float32)
    ThematicSeeds(ThematicSeeds.Params(**params)).run(st, c)  # type: ignore[arg-type]
    return {s.node_id or "" for s in st.seeds}, c


def test_thematic_seeds_skip_a_community_inside_one_document(store: GraphStore) -> None:
    _communities(store, ["d1", "d2"])
    seeds, ctx = _thematic(store)
    assert seeds == {"ent:a", "ent:b"}  # comm:one (one document) hands nothing to ent:x
    assert ctx.stats["skipped_single_document"] == ["comm:one"]
    seeds, _ = _thematic(store, min_documents=1)
    assert seeds == {"ent:a", "ent:b", "ent:x"}


def test_thematic_seeds_keep_every_community_of_a_single_document_group(store: GraphStore) -> None:
    _communities(store, ["d1"])
    seeds, ctx = _thematic(store)
    assert seeds == {"ent:a", "ent:b", "ent:x"} and "skipped_single_document" not in ctx.stats


def test_keyword_fallback_matches_whole_title_words(store: GraphStore) -> None:
    titles = {"s1": "Warranty Terms", "s2": "Payment schedule (terms)", "s3": "warranty_extra", "s4": "Warranties"}
    store.write(GROUP, nodes=[Node(id=i, label=Label.SECTION, group=GROUP, props={"title": t}) for i, t in titles.items()], edges=[])
    rows, _ = StructuralSeeds()._keyword_sections(store, GROUP, "What are the warranty terms?")
    # s1 has both words, s2 "terms" only; "warranty_extra" and "Warranties" are other words
    assert rows == [("s1", 2.0, 2), ("s2", 1.0, 1)]


def test_structural_seeds_name_their_sections_in_the_trace(store: GraphStore) -> None:
    sentence = {"text": "A.", "chunk_id": "c1", "section_id": "s1", "section_path": "Doc > Terms"}
    store.write(
        GROUP,
        nodes=[
            Node(id="s1", label=Label.SECTION, group=GROUP, doc_id="d", props={"title": "Terms", "path": "Doc > Terms"}),
            Node(id="c1", label=Label.CHUNK, group=GROUP, doc_id="d", props={"text": "A. A."}),
            Node(id="ent:a", label=Label.ENTITY, group=GROUP, props={"name": "A"}),
            *(Node(id=f"x{i}", label=Label.SENTENCE, group=GROUP, doc_id="d", props=sentence) for i in (1, 2)),
        ],
        edges=[Edge(src="c1", dst="s1", type=EdgeType.IN_SECTION, group=GROUP),
               Edge(src="c1", dst="ent:a", type=EdgeType.MENTIONS, group=GROUP)],
        vectors={"sentence": (["x1", "x2"], np.array([[1, 0, 0], [0.9, 0.1, 0]], dtype=np.float32))},
    )

    def run(**params: int) -> tuple[QueryState, StageContext]:
        st = QueryState("What are the terms?", GROUP)
        c = _FixedQuery(services=Services(store, GROUP), stage_id="s")
        c.vector = np.array([1, 0, 0], dtype=np.float32)
        StructuralSeeds(StructuralSeeds.Params(**params)).run(st, c)
        return st, c

    st, c = run()
    assert c.stats["mode"] == "sentences" and c.stats["sections"] == [{"section": "Doc > Terms", "score": pytest.approx(1.9939, abs=1e-3), "hits": 2}]
    assert [(s.node_id, s.tier) for s in st.seeds] == [("ent:a", "structural")]
    # two hits are too few now: the title matches the question's word, and the trace reads the
    # section's path from its node
    st, c = run(min_sentences=3)
    assert c.stats["mode"] == "keyword_fallback" and c.stats["sections"][0]["section"] == "Doc > Terms"
