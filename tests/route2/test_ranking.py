"""Ranking rules of the shipped routes: an entity's own page in the PPR graph, rank fusion of
lists whose scores are on different scales, and the graph/vector fusion of vector_fallback
and skeleton_traverse. Hand-made inputs; graphs in the real embedded store."""

from __future__ import annotations

import numpy as np
import pytest
from graphroute.core.api.models import Edge, EdgeType, Evidence, Label, Node, Seed
from graphroute.core.api.stage import QueryState, StageContext
from graphroute.core.api.store import GraphStore
from graphroute.core.errors import ConfigError
from graphroute.core.lib.entities import OWN_PAGES_META, title_names
from graphroute.core.lib.fusion import rrf_merge
from graphroute.core.query.services import Services
from graphroute.plugins.denoisers.route2 import VectorFallback
from graphroute.plugins.expanders.graph import PPR, PPRPassages, title_pairs
from graphroute.plugins.graph_builders.entity_graph import own_page_edges

from .conftest import GROUP, context


def ev(eid: str, score: float) -> Evidence:
    return Evidence(id=eid, text=f"text of {eid}", score=score, kind="chunk", document=eid, document_id=f"d-{eid}")


# --------------------------------------------------------------------------- rank fusion


def test_rrf_puts_what_both_lists_rank_high_first_whatever_their_scales() -> None:
    ppr = [ev("a", 0.004), ev("b", 0.003), ev("c", 0.001)]  # PageRank mass
    dense = [ev("c", 0.91), ev("d", 0.90), ev("b", 0.42)]  # cosines
    fused = rrf_merge([ppr, dense])
    assert [e.id for e in fused] == ["c", "b", "a", "d"]
    # only ranks count: rescaling one list's scores changes nothing
    louder = [ev(e.id, e.score * 1000) for e in ppr]
    assert [e.id for e in rrf_merge([louder, dense])] == [e.id for e in fused]
    assert fused[0].score == pytest.approx(1 / 63 + 1 / 61)
    assert fused[0].metadata["branch_score"] == 0.001 and ppr[2].score == 0.001  # inputs untouched


def test_rrf_breaks_ties_by_id() -> None:
    assert [e.id for e in rrf_merge([[ev("y", 1.0)], [ev("x", 5.0)]])] == ["x", "y"]


class _FixedQuery(StageContext):
    """vector_fallback reads the query vector; here it is given, so the test checks the merge
    rule, not the embedding model."""

    vector: np.ndarray = np.zeros(0)

    def query_vector(self, text: str) -> np.ndarray:
        return self.vector


def _chunk(cid: str, title: str, text: str = "") -> Node:
    return Node(id=cid, label=Label.CHUNK, group=GROUP, doc_id=f"d-{cid}", props={"text": text or f"text of {cid}", "document": title})


@pytest.mark.parametrize("merge", ["append", "rrf"])
def test_vector_fallback_appends_or_fuses_by_rank(store: GraphStore, merge: str) -> None:
    store.write(GROUP, nodes=[_chunk(c, c.upper()) for c in ("c1", "c2", "c3")],
                vectors={"chunk": (["c1", "c2", "c3"], np.eye(3, dtype=np.float32))})
    st = QueryState("q", GROUP)
    # the graph ranked c3 first, then c2; the vector search ranks c1 first, then c2
    st.evidence = [ev("c3", 0.002), ev("c2", 0.001)]
    c = _FixedQuery(services=Services(store, GROUP), stage_id="t")
    c.vector = np.array([0.8, 0.6, 0.0], dtype=np.float32)
    VectorFallback(VectorFallback.Params(k=2, merge=merge)).run(st, c)  # type: ignore[arg-type]
    order = [e.id for e in st.evidence]
    if merge == "append":  # the graph's order kept, the new hit below it
        assert order == ["c3", "c2", "c1"] and st.evidence[-1].score < 0.001
    else:  # c2 is ranked by both lists
        assert order == ["c2", "c1", "c3"]
        assert [e.score for e in st.evidence] == sorted((e.score for e in st.evidence), reverse=True)
    assert c.stats["added"] == 1


# --------------------------------------------------------------------------- an entity's own page


def test_title_names_read_the_subject_of_a_title() -> None:
    assert title_names("Brother (Pearl Jam song)") == ["brother pearl jam song", "brother"]
    assert title_names("Dodge City, Kansas") == ["dodge city kansas", "dodge city"]
    assert title_names("Team: Payments") == ["team payments", "payments"]
    assert title_names("Iowa") == ["iowa"]


def own_page_graph(store: GraphStore) -> None:
    """Iowa is mentioned by its own page and by a page about a wind farm, equally."""
    ents = [Node(id=f"ent:{n}", label=Label.ENTITY, group=GROUP, props={"name": n.title()}) for n in ("iowa", "wind farm")]
    store.write(
        GROUP,
        nodes=[*ents, _chunk("home", "Iowa (state)"), _chunk("farm", "Intrepid Wind Farm")],
        edges=[
            Edge(src="home", dst="ent:iowa", type=EdgeType.MENTIONS, group=GROUP),
            Edge(src="farm", dst="ent:iowa", type=EdgeType.MENTIONS, group=GROUP),
            Edge(src="farm", dst="ent:wind farm", type=EdgeType.MENTIONS, group=GROUP),
        ],
    )


def passages(store: GraphStore, weight_title: float, solver: str = "direct") -> list[tuple[str, float]]:
    st = QueryState("q", GROUP)
    st.seeds = [Seed(name="Iowa", node_id="ent:iowa")]
    PPR(PPR.Params(budget=1.0, solver=solver, weight_title=weight_title)).run(st, context(store))  # type: ignore[arg-type]
    PPRPassages(PPRPassages.Params(top_k=2)).run(st, context(store))
    return [(e.id, e.score) for e in st.evidence]


def test_the_entitys_own_page_gets_an_edge_beside_its_mentions(store: GraphStore) -> None:
    own_page_graph(store)
    # a group indexed before OWN_PAGE edges: the exact solvers read the titles themselves
    assert title_pairs(store, GROUP) == [("ent:iowa", "home")]  # "Intrepid Wind Farm" names no entity
    # without the edge the farm page, which the walk also reaches through the farm, outranks
    # Iowa's own page; with it, the page about Iowa comes first
    assert [c for c, _ in passages(store, 0.0)] == ["farm", "home"]
    legacy = passages(store, 1.0)
    assert [c for c, _ in legacy] == ["home", "farm"]
    # ... which the push cannot: it says so rather than rank another graph
    with pytest.raises(ConfigError, match="OWN_PAGE"):
        passages(store, 1.0, "push")
    # the edges the entity_graph step writes: the same graph for every solver
    chunks = [(n.id, n.doc_id or "", str(n.props["document"])) for n in store.iter_nodes(GROUP, Label.CHUNK)]
    edges = own_page_edges(GROUP, chunks, {"ent:iowa", "ent:wind farm"})
    assert [(e.src, e.dst, e.type) for e in edges] == [("home", "ent:iowa", EdgeType.OWN_PAGE)]
    store.write(GROUP, edges=edges)
    store.set_meta(GROUP, OWN_PAGES_META, {"edges": len(edges)})
    for solver, rel in (("direct", 1e-12), ("push", 1e-3)):
        got = passages(store, 1.0, solver)
        assert [c for c, _ in got] == ["home", "farm"]
        assert [s for _, s in got] == pytest.approx([s for _, s in legacy], rel=rel)
