"""PPR on a small known graph stored in the real embedded store."""

from __future__ import annotations

import sys

import numpy as np
import pytest
import scipy.sparse as sp
from graphroute.core.api.models import Edge, EdgeType, Label, Node, ScoredNode, Seed
from graphroute.core.api.stage import QueryState
from graphroute.core.api.store import GraphStore
from graphroute.plugins.expanders import graph as graph_module
from graphroute.plugins.expanders.graph import (
    _FACTORS_KEPT,
    PPR,
    EntityChunks,
    NodeMass,
    PathWeights,
    SparseProduct,
    TypedGraph,
    budget_cut,
    cg_pagerank,
    co_mention_form,
    direct_pagerank,
    personalized_pagerank,
    row_blocks,
    settle_ties,
    top_positive,
    transition_matrix,
    typed_graph,
)
from hypothesis import assume, given, settings
from hypothesis import strategies as hs

from .conftest import GROUP, chain_graph, context, ent, rel


def run_ppr(store: GraphStore, seeds: list[Seed], **params: object) -> tuple[QueryState, dict[str, object]]:
    st = QueryState("q", GROUP)
    st.seeds = seeds
    c = context(store)
    PPR(PPR.Params(**params)).run(st, c)  # type: ignore[arg-type]
    return st, c.stats


def test_power_iteration_matches_closed_form() -> None:
    a = sp.csr_matrix(np.array([[0, 1, 1, 0], [1, 0, 1, 0], [1, 1, 0, 1], [0, 0, 1, 0]], dtype=float))
    p = np.array([1.0, 0, 0, 0])
    trans, dangling = transition_matrix(a)
    res = personalized_pagerank(trans, p, damping=0.85, dangling=dangling)
    exact = np.linalg.solve(np.eye(4) - 0.85 * trans.toarray(), 0.15 * p)
    assert res.converged and np.allclose(res.scores, exact, atol=1e-8)
    assert res.scores.sum() == pytest.approx(1.0)


def _random_graph(nodes: int, edges: int, seed: int) -> TypedGraph:
    """A symmetric weighted graph with some nodes left without edges (dangling)."""
    rng = np.random.default_rng(seed)
    r = rng.integers(0, nodes - 3, edges)
    c = rng.integers(0, nodes - 3, edges)
    keep = r != c
    w = rng.random(int(keep.sum())) + 0.1
    adj = sp.coo_matrix((w, (r[keep], c[keep])), shape=(nodes, nodes)).tocsr()
    adj = (adj + adj.T).tocsr()
    trans, dangling = transition_matrix(adj)
    ids = tuple(f"ent:{i:04d}" for i in range(nodes))
    return TypedGraph(ids, {x: i for i, x in enumerate(ids)}, adj, trans, dangling, np.ones(nodes, dtype=bool))


@given(hs.integers(min_value=0, max_value=2**16), hs.sampled_from([0.5, 0.72, 0.85]), hs.integers(min_value=0, max_value=2))
@settings(max_examples=40, deadline=None)
def test_exact_solvers_reach_the_power_iterations_fixed_point(seed: int, damping: float, isolated: int) -> None:
    """The LU solve, conjugate gradients and the power iteration agree on graphs with
    dangling nodes and on seeds outside the graph (isolated nodes appended to the teleport
    vector)."""
    g = _random_graph(60, 150, seed)
    rng = np.random.default_rng(seed + 1)
    n = len(g.ids) + isolated
    teleport = np.zeros(n)
    teleport[rng.choice(n, 4, replace=False)] = rng.random(4) + 0.05
    direct, _ = direct_pagerank(g, teleport, damping=damping)
    trans = sp.block_diag((g.transition, sp.csr_matrix((isolated, isolated))), format="csr")
    dangling = np.concatenate([g.dangling, np.ones(isolated, dtype=bool)])
    power = personalized_pagerank(trans, teleport, damping=damping, dangling=dangling, tol=1e-14, max_iter=2000)
    assert power.converged
    np.testing.assert_allclose(direct, power.scores, atol=1e-11)
    assert direct.sum() == pytest.approx(1.0)
    cg = cg_pagerank(g, teleport, damping=damping, tol=1e-12)
    assert cg.converged
    np.testing.assert_allclose(cg.scores, power.scores, atol=1e-11)


@given(hs.integers(min_value=0, max_value=2**16), hs.sampled_from([1e-4, 1e-6, 1e-8]))
@settings(max_examples=30, deadline=None)
def test_cg_error_stays_within_its_certified_bound(seed: int, tol: float) -> None:
    """cg stops on a bound of its L1 error, not on a step size: the scores it returns are
    within ``tol`` of the exact ones, in fewer passes than the power iteration needs for the
    same tol."""
    g = _random_graph(80, 240, seed)
    teleport = np.zeros(len(g.ids))
    teleport[np.random.default_rng(seed).choice(len(g.ids), 3, replace=False)] = 1.0
    exact, _ = direct_pagerank(g, teleport, damping=0.85)
    cg = cg_pagerank(g, teleport, damping=0.85, tol=tol)
    power = personalized_pagerank(g.transition, teleport, damping=0.85, dangling=g.dangling, tol=tol)
    assert cg.converged and np.abs(cg.scores - exact).sum() <= tol
    assert cg.iterations < power.iterations


@given(hs.integers(min_value=0, max_value=2**16), hs.integers(min_value=1, max_value=3000))
@settings(max_examples=30, deadline=None)
def test_a_large_graph_multiplies_in_two_row_blocks_to_the_same_bits(seed: int, threshold: int) -> None:
    """Above ``PARALLEL_NNZ`` the symmetric form's sparse part is two row blocks multiplied
    by scipy on two threads; each row is summed as in scipy's one product, to the last bit,
    and CG takes the same passes as on one block (which torch multiplies, summing in
    another grouping) to the same scores."""
    g = _random_graph(120, 600, seed)
    teleport = np.zeros(len(g.ids))
    teleport[[seed % 117, (seed // 7) % 117]] = 1.0
    one = cg_pagerank(g, teleport, damping=0.85)
    assert len(g.symmetric.sparse) == 1
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(graph_module, "PARALLEL_NNZ", threshold)
        blocks = row_blocks(g.adjacency)
        split = TypedGraph(g.ids, g.index, g.adjacency, g.transition, g.dangling, g.is_entity)
        form = split.symmetric
    large = g.adjacency.nnz >= threshold
    assert len(form.sparse) == len(blocks) == (2 if large else 1)
    assert sum(b.shape[0] for b in blocks) == len(g.ids) and sum(b.nnz for b in blocks) == g.adjacency.nnz
    if large:  # cut by non-zeros, not rows: each block holds about half
        assert max(b.nnz for b in blocks) <= g.adjacency.nnz // 2 + int(np.diff(g.adjacency.indptr).max())
    v = np.random.default_rng(seed).random(len(g.ids))
    if large:  # scipy's bits
        assert np.array_equal(form.times(v), g.symmetric.sparse[0] @ v)
    else:
        np.testing.assert_allclose(form.times(v), g.symmetric.sparse[0] @ v, rtol=1e-13, atol=0)
    two = cg_pagerank(split, teleport, damping=0.85)
    assert two.iterations == one.iterations and np.abs(two.scores - one.scores).sum() < 1e-12


@pytest.mark.torch  # torch is in the torch extra only: run by make test-torch
@given(hs.integers(min_value=0, max_value=2**16))
@settings(max_examples=30, deadline=None)
def test_the_sparse_product_is_scipys_on_any_number_of_threads(seed: int) -> None:
    """torch's product (on its thread pool) is scipy's to ~1e-16 relative, and the same bits
    whether one thread or two sum the rows; without torch, scipy multiplies, and CG takes
    the same passes over either product to the same scores."""
    torch = pytest.importorskip("torch")
    g = _random_graph(120, 600, seed)
    form = g.symmetric
    assert isinstance(form._one, SparseProduct) and form._one._tensor is not None
    v = np.random.default_rng(seed).random(len(g.ids))
    exact = form.sparse[0] @ v
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = form.times(v).copy()
        torch.set_num_threads(2)
        two = form.times(v).copy()
    finally:
        torch.set_num_threads(before)
    assert np.array_equal(one, two)
    np.testing.assert_allclose(one, exact, rtol=1e-13, atol=0)
    with pytest.MonkeyPatch.context() as mp:
        mp.setitem(sys.modules, "torch", None)  # `import torch` fails: scipy multiplies
        plain = TypedGraph(g.ids, g.index, g.adjacency, g.transition, g.dangling, g.is_entity)
        assert plain.symmetric._one is not None and plain.symmetric._one._tensor is None
    assert np.array_equal(plain.symmetric.times(v), exact)
    teleport = np.zeros(len(g.ids))
    teleport[[seed % 117, (seed // 7) % 117]] = 1.0
    a, b = cg_pagerank(g, teleport, damping=0.85), cg_pagerank(plain, teleport, damping=0.85)
    assert a.iterations == b.iterations and np.abs(a.scores - b.scores).sum() < 1e-12


def test_cg_reports_when_it_runs_out_of_iterations() -> None:
    g = _random_graph(50, 120, 7)
    teleport = np.zeros(50)
    teleport[1] = 1.0
    short = cg_pagerank(g, teleport, damping=0.85, tol=1e-12, max_iter=2)
    assert short.iterations == 2 and not short.converged
    assert short.scores.sum() == pytest.approx(1.0)


def test_factors_are_made_once_per_damping() -> None:
    g = _random_graph(40, 90, 3)
    teleport = np.zeros(40)
    teleport[5] = 1.0
    first, made = direct_pagerank(g, teleport, damping=0.85)
    assert made
    again, made = direct_pagerank(g, teleport, damping=0.85)
    assert not made and np.array_equal(first, again)
    other, made = direct_pagerank(g, teleport, damping=0.5)
    assert made and other[5] > first[5]  # more teleport keeps more mass on the seed


def test_the_factors_used_last_are_the_ones_kept() -> None:
    """A busy damping survives newer ones: the least recently used factors go first."""
    g = _random_graph(40, 90, 3)
    teleport = np.zeros(40)
    teleport[5] = 1.0
    kept = [0.5 + 0.05 * i for i in range(_FACTORS_KEPT)]
    for d in kept:
        assert direct_pagerank(g, teleport, damping=d)[1]
    assert not direct_pagerank(g, teleport, damping=kept[0])[1]  # used again: now the newest
    assert direct_pagerank(g, teleport, damping=0.95)[1]  # one too many: kept[1] goes
    assert not direct_pagerank(g, teleport, damping=kept[0])[1]
    assert direct_pagerank(g, teleport, damping=kept[1])[1]


def test_settle_ties_makes_rounding_level_differences_exact_ties() -> None:
    s = np.array([0.3, 0.1 + 1e-17, 0.1, 0.1 * (1 + 1e-9), 0.0])
    settled = settle_ties(s)
    assert settled[1] == settled[2]  # last-bit noise: one value
    assert settled[3] > settled[2]  # a real difference survives
    assert settled[4] == 0.0 and np.allclose(settled, s, rtol=1e-11)
    assert np.array_equal(settle_ties(np.zeros(3)), np.zeros(3))


def test_both_solvers_rank_symmetric_entities_by_id(store: GraphStore) -> None:
    """A star: the leaves are interchangeable, so they tie exactly and rank by id whichever
    solver ran (without settling, the last bits of each solver decided)."""
    leaves = ["m", "k", "z", "b", "q"]
    store.write(GROUP, nodes=[ent("hub"), *(ent(x) for x in leaves)], edges=[rel("hub", x) for x in leaves])
    seeds = [Seed(name="hub", node_id="ent:hub")]
    power, pstats = run_ppr(store, seeds, budget=1.0, solver="power")
    direct, dstats = run_ppr(store, seeds, budget=1.0, solver="direct")
    cg, cstats = run_ppr(store, seeds, budget=1.0, solver="cg")
    expect = ["ent:hub", "ent:b", "ent:k", "ent:m", "ent:q", "ent:z"]
    assert [e.id for e in power.entities] == expect == [e.id for e in direct.entities] == [e.id for e in cg.entities]
    assert len({e.score for e in direct.entities[1:]}) == 1 and len({e.score for e in cg.entities[1:]}) == 1
    np.testing.assert_allclose([e.score for e in power.entities], [e.score for e in direct.entities], rtol=1e-8)
    np.testing.assert_allclose([e.score for e in cg.entities], [e.score for e in direct.entities], rtol=1e-8)
    assert pstats["solver"] == "power" and dstats["solver"] == "direct" and dstats["factorised"] is True
    assert cstats["solver"] == "cg" and cstats["converged"] is True and 0 < int(cstats["iterations"]) < int(pstats["iterations"])


def test_mass_concentrates_near_the_seed(store: GraphStore) -> None:
    chain_graph(store)
    st, stats = run_ppr(store, [Seed(name="a", node_id="ent:a")], budget=1.0)
    order = [e.id for e in st.entities]
    # decays with distance (a and b trade places: on a path, b has twice a's degree)
    assert set(order[:2]) == {"ent:a", "ent:b"} and order[2:] == ["ent:c", "ent:d", "ent:e"]
    assert "ent:x" not in order  # another component gets nothing
    assert stats["converged"] is True and stats["seeds_in_graph"] == 1
    assert st.entities[0].community == 0 and st.entities[0].name == "B"


def test_teleport_weights_shift_the_mass(store: GraphStore) -> None:
    chain_graph(store)
    seeds_a = [Seed(name="a", node_id="ent:a", weight=0.9), Seed(name="e", node_id="ent:e", weight=0.1)]
    seeds_e = [Seed(name="a", node_id="ent:a", weight=0.1), Seed(name="e", node_id="ent:e", weight=0.9)]
    sa = {e.id: e.score for e in run_ppr(store, seeds_a, budget=1.0)[0].entities}
    se = {e.id: e.score for e in run_ppr(store, seeds_e, budget=1.0)[0].entities}
    assert sa["ent:b"] > sa["ent:d"] and se["ent:d"] > se["ent:b"]
    assert sa["ent:a"] > se["ent:a"]


def test_deterministic_and_damping_matters(store: GraphStore) -> None:
    chain_graph(store)
    seeds = [Seed(name="c", node_id="ent:c")]
    r1 = run_ppr(store, seeds, budget=1.0)[0].entities
    r2 = run_ppr(store, seeds, budget=1.0)[0].entities
    assert [(e.id, e.score) for e in r1] == [(e.id, e.score) for e in r2]
    hi = {e.id: e.score for e in run_ppr(store, seeds, budget=1.0, damping=0.9)[0].entities}
    lo = {e.id: e.score for e in run_ppr(store, seeds, budget=1.0, damping=0.5)[0].entities}
    assert lo["ent:c"] > hi["ent:c"]  # more teleport keeps more mass on the seed


def test_state_damping_used_when_param_is_null(store: GraphStore) -> None:
    chain_graph(store)
    st = QueryState("q", GROUP)
    st.seeds = [Seed(name="a", node_id="ent:a")]
    st.damping = 0.72
    c = context(store)
    PPR(PPR.Params(damping=None)).run(st, c)
    assert c.stats["damping"] == 0.72
    c2 = context(store)
    PPR().run(st, c2)  # the default (null) is the state's damping too
    assert c2.stats["damping"] == 0.72
    c3 = context(store)
    PPR(PPR.Params(damping=0.85)).run(st, c3)  # a number in the route is the route's own
    assert c3.stats["damping"] == 0.85
    c4 = context(store)
    PPR().run(QueryState("q", GROUP, seeds=st.seeds), c4)  # nothing chose one: 0.85
    assert c4.stats["damping"] == 0.85


def test_budget_and_top_k(store: GraphStore) -> None:
    assert budget_cut([0.5, 0.3, 0.1, 0.1], 0.8) == 2
    assert budget_cut([0.5, 0.3, 0.1, 0.1], 0.81) == 3
    assert budget_cut([0.5, 0.5], 1.0) == 2
    chain_graph(store)
    st, stats = run_ppr(store, [Seed(name="a", node_id="ent:a")], top_k=3, budget=1.0)
    assert len(st.entities) == 3 and stats["entities_ranked"] == 3


def test_path_weights_select_edge_types(store: GraphStore) -> None:
    chain_graph(store)
    # x - y is a CO_OCCURS edge (path 1); a SEMANTICALLY_SIMILAR a - x joins the components (path 3)
    store.write(GROUP, edges=[Edge(src="ent:a", dst="ent:x", type=EdgeType.SEMANTICALLY_SIMILAR, group=GROUP)])
    with_sim = {e.id for e in run_ppr(store, [Seed(name="a", node_id="ent:a")], budget=1.0)[0].entities}
    no_sim = {e.id for e in run_ppr(store, [Seed(name="a", node_id="ent:a")], budget=1.0, weight_similar=0.0)[0].entities}
    assert "ent:x" in with_sim and "ent:y" in with_sim
    assert "ent:x" not in no_sim


def test_section_path_connects_entities_through_chunks(store: GraphStore) -> None:
    # p and q are only linked via chunk -> section ~ section <- chunk (path 2)
    store.write(
        GROUP,
        nodes=[
            ent("p"), ent("q"),
            Node(id="c1", label=Label.CHUNK, group=GROUP, doc_id="d1", props={"text": "P is here.", "title": "D1"}),
            Node(id="c2", label=Label.CHUNK, group=GROUP, doc_id="d2", props={"text": "Q is there.", "title": "D2"}),
            Node(id="s1", label=Label.SECTION, group=GROUP, doc_id="d1", props={"title": "S1"}),
            Node(id="s2", label=Label.SECTION, group=GROUP, doc_id="d2", props={"title": "S2"}),
        ],
        edges=[
            Edge(src="c1", dst="ent:p", type=EdgeType.MENTIONS, group=GROUP),
            Edge(src="c2", dst="ent:q", type=EdgeType.MENTIONS, group=GROUP),
            Edge(src="c1", dst="s1", type=EdgeType.IN_SECTION, group=GROUP),
            Edge(src="c2", dst="s2", type=EdgeType.IN_SECTION, group=GROUP),
            Edge(src="s1", dst="s2", type=EdgeType.SEMANTICALLY_SIMILAR, group=GROUP),
        ],
    )
    seeds = [Seed(name="p", node_id="ent:p")]
    assert "ent:q" in {e.id for e in run_ppr(store, seeds, budget=1.0)[0].entities}
    assert "ent:q" not in {e.id for e in run_ppr(store, seeds, budget=1.0, weight_section=0.0)[0].entities}
    # entity_chunks: p's chunk, scored by p, with document fields filled
    st, _ = run_ppr(store, seeds, budget=1.0)
    c = context(store)
    EntityChunks().run(st, c)
    first = st.evidence[0]
    assert first.id == "c1" and first.entity == "ent:p" and first.document == "D1" and first.document_id == "d1"
    assert first.score == st.entities[0].score and first.kind == "chunk"


def test_seed_without_edges_still_ranks(store: GraphStore) -> None:
    store.write(GROUP, nodes=[ent("lonely"), ent("a"), ent("b")], edges=[Edge(src="ent:a", dst="ent:b", type=EdgeType.RELATION, group=GROUP)])
    st, stats = run_ppr(store, [Seed(name="lonely", node_id="ent:lonely")])
    assert [e.id for e in st.entities] == ["ent:lonely"] and stats["seeds_in_graph"] == 0
    # one node seeded twice gets the sum of the weights, beside a seed outside the graph
    twice = [Seed(name="lonely", node_id="ent:lonely", weight=0.5), Seed(name="a", node_id="ent:a", weight=0.2),
             Seed(name="a", node_id="ent:a", weight=0.3)]
    once = [Seed(name="lonely", node_id="ent:lonely", weight=0.5), Seed(name="a", node_id="ent:a", weight=0.5)]
    (st2, stats2), (st1, _) = run_ppr(store, twice, budget=1.0), run_ppr(store, once, budget=1.0)
    assert stats2["seeds_in_graph"] == 2 and stats2["graph_nodes"] == 3
    assert [(e.id, round(e.score, 12)) for e in st2.entities] == [(e.id, round(e.score, 12)) for e in st1.entities]
    assert {e.id for e in st2.entities} == {"ent:lonely", "ent:a", "ent:b"}


def _hub_graph(store: GraphStore, chunks: int) -> None:
    """One hub entity mentioned by ``chunks`` chunks (written in reverse reading order) and by
    sentences, which entity_chunks must skip."""
    nodes = [ent("hub"), ent("other")]
    edges = []
    for i in reversed(range(chunks)):
        cid = f"c{i:03d}"
        nodes.append(Node(id=cid, label=Label.CHUNK, group=GROUP, doc_id=f"d{i // 4}", props={"text": f"chunk {i}", "index": i % 4}))
        edges.append(Edge(src=cid, dst="ent:hub", type=EdgeType.MENTIONS, group=GROUP))
        nodes.append(Node(id=f"s{i:03d}", label=Label.SENTENCE, group=GROUP, doc_id=f"d{i // 4}", props={"text": f"sentence {i}"}))
        edges.append(Edge(src=f"s{i:03d}", dst="ent:hub", type=EdgeType.MENTIONS, group=GROUP))
    if chunks > 5:
        edges.append(Edge(src="c005", dst="ent:other", type=EdgeType.MENTIONS, group=GROUP))
    store.write(GROUP, nodes=nodes, edges=edges)


def test_entity_chunks_keeps_the_first_chunks_in_reading_order(store: GraphStore) -> None:
    _hub_graph(store, 40)
    st = QueryState("q", GROUP)
    st.entities = [ScoredNode(id="ent:hub", name="Hub", score=0.5), ScoredNode(id="ent:other", name="Other", score=0.2)]
    EntityChunks(EntityChunks.Params(limit_per_entity=6)).run(st, context(store))
    assert [e.id for e in st.evidence] == ["c000", "c001", "c002", "c003", "c004", "c005", "c005"]
    assert [e.entity for e in st.evidence][-1] == "ent:other" and st.evidence[-1].score == 0.2

    # order "ppr": the chunks' own PPR mass first, reading order among equal mass
    st = QueryState("q", GROUP)
    st.entities = [ScoredNode(id="ent:hub", name="Hub", score=0.5)]
    st.node_scores = {"c030": 0.3, "c017": 0.3, "c002": 0.1}
    EntityChunks(EntityChunks.Params(limit_per_entity=4, order="ppr")).run(st, context(store))
    assert [e.id for e in st.evidence] == ["c017", "c030", "c002", "c000"]


def test_entity_chunks_sees_a_write_made_after_the_first_query(store: GraphStore) -> None:
    _hub_graph(store, 3)
    st = QueryState("q", GROUP)
    st.entities = [ScoredNode(id="ent:other", name="Other", score=1.0)]
    EntityChunks().run(st, context(store))
    assert st.evidence == []  # "other" has no chunk yet
    store.write(
        GROUP,
        nodes=[Node(id="c999", label=Label.CHUNK, group=GROUP, doc_id="d0", props={"text": "new", "index": 0})],
        edges=[Edge(src="c999", dst="ent:other", type=EdgeType.MENTIONS, group=GROUP)],
    )
    st = QueryState("q", GROUP)
    st.entities = [ScoredNode(id="ent:other", name="Other", score=1.0)]
    EntityChunks().run(st, context(store))
    assert [e.id for e in st.evidence] == ["c999"]


@given(
    hs.lists(hs.sampled_from([0.0, 0.1, 0.2, 0.2, 0.5, 1e-9]), min_size=1, max_size=60),
    hs.integers(min_value=1, max_value=20),
    hs.integers(min_value=0, max_value=2**16),
)
@settings(max_examples=200, deadline=None)
def test_node_mass_top_matches_a_full_sort(scores: list[float], k: int, seed: int) -> None:
    """NodeMass.top (partition, then widen) keeps what sorting every (id, mass) pair keeps,
    ties by id included."""
    ids = tuple(f"n{i:03d}" for i in range(len(scores)))
    rng = np.random.default_rng(seed)
    among = frozenset(x for x in ids if rng.random() < 0.5)
    mass = NodeMass(ids, {x: i for i, x in enumerate(ids)}, np.asarray(scores))
    expected = sorted(((x, m) for x, m in zip(ids, scores, strict=True) if x in among and m > 0), key=lambda cm: (-cm[1], cm[0]))[:k]
    assert mass.top(k, among) == expected
    assert dict(mass) == {x: m for x, m in zip(ids, scores, strict=True) if m > 0}


def _clique_graph(seed: int, linked: float, extra_edges: int, weight: float) -> tuple[sp.csr_matrix, sp.csr_matrix]:
    """Entities 0..149 and chunks 150..164: each chunk mentions 8-12 entities; the chunks picked
    with probability ``linked`` link their entities pairwise (CO_OCCURS, ``weight``, once per
    pair however many chunks share it), plus mention edges and random other edges (none
    between an entity and a chunk). Returns
    (adjacency, node x chunk incidence)."""
    rng = np.random.default_rng(seed)
    ents, chunks = 150, 15  # few pairs recur across chunks, as in a real corpus's chunks
    n = ents + chunks
    inc = sp.lil_matrix((n, chunks))
    adj = sp.lil_matrix((n, n))
    for c in range(chunks):
        members = rng.choice(ents, int(rng.integers(8, 13)), replace=False)
        for e in members:
            inc[e, c] = 1.0
            adj[e, ents + c] = adj[ents + c, e] = 1.0
        if rng.random() < linked:
            for a in members:
                for b in members:
                    if a != b:
                        adj[a, b] = weight
    for _ in range(extra_edges):
        a, b = rng.choice(n, 2, replace=False)
        if (a < ents) != (b < ents):
            continue  # as in the index, only MENTIONS link an entity and a chunk
        w = float(rng.random()) + 0.1
        adj[a, b] += w
        adj[b, a] += w
    return adj.tocsr(), inc.tocsr()


@given(hs.integers(min_value=0, max_value=2**16), hs.sampled_from([0.5, 1.0, 2.0]), hs.sampled_from([0.0, 0.6, 1.0]))
@settings(max_examples=40, deadline=None)
def test_co_mention_form_is_the_same_matrix(seed: int, weight: float, linked: float) -> None:
    """Stored as a product or not, ``S`` is the same matrix: the remainder carries the pairs
    linked in several chunks, the chunks that linked nothing and every other edge; and CG
    over it takes the same passes to the same scores."""
    adj, inc = _clique_graph(seed, linked, extra_edges=25, weight=weight)
    trans, dangling = transition_matrix(adj)
    ids = tuple(f"ent:{i:03d}" for i in range(adj.shape[0]))
    index = {x: i for i, x in enumerate(ids)}
    is_ent = np.arange(adj.shape[0]) < 150
    plain = TypedGraph(ids, index, adj, trans, dangling, is_ent)
    split = TypedGraph(ids, index, adj, trans, dangling, is_ent, ~is_ent, weight)
    form = split.symmetric
    # every chunk linked: the product pays (150 entities, so pairs seldom recur; 0 of 9,000
    # seeds x weights fell back in a scan), and it is the form this test is about
    assume(form.low is not None or linked < 1.0)
    # the graph reads the chunks' mentions off its own entity x chunk entries: the same
    # decision as with the true incidence
    assert (form.low is None) == (co_mention_form(adj, inc, weight, form.inv_root) is None)
    dense = (sp.diags(form.inv_root) @ adj @ sp.diags(form.inv_root)).toarray()
    v = np.random.default_rng(seed).random(adj.shape[0])
    np.testing.assert_allclose(form.times(v), dense @ v, atol=1e-12)
    np.testing.assert_allclose(plain.symmetric.times(v), dense @ v, atol=1e-12)
    assert plain.symmetric.low is None
    teleport = np.zeros(adj.shape[0])
    teleport[[1, 7]] = [0.7, 0.3]
    a, b = cg_pagerank(plain, teleport), cg_pagerank(split, teleport)
    assert a.iterations == b.iterations and np.abs(a.scores - b.scores).sum() < 1e-12


def test_co_mention_form_only_where_it_stores_less() -> None:
    def inv_root(a: sp.csr_matrix) -> np.ndarray:
        deg = np.asarray(a.sum(axis=0)).ravel()
        return np.divide(1.0, np.sqrt(deg), out=np.zeros_like(deg), where=deg > 0)

    adj, inc = _clique_graph(3, linked=1.0, extra_edges=0, weight=1.0)
    split = co_mention_form(adj, inc, 1.0, inv_root(adj))
    assert split is not None
    sparse, low = split
    assert sparse.nnz + 2 * low.nnz < adj.nnz
    # chunks that link nothing: the product would only add entries for the remainder to cancel
    unlinked, inc2 = _clique_graph(3, linked=0.0, extra_edges=0, weight=1.0)
    assert co_mention_form(unlinked, inc2, 1.0, inv_root(unlinked)) is None
    # a weight of zero means the co-occurrence edges are not in the graph
    assert co_mention_form(adj, inc, 0.0, inv_root(adj)) is None
    # one chunk naming every entity: M M^T would be larger than the whole graph, never formed
    wide = sp.csr_matrix(np.ones((adj.shape[0], 1)))
    assert co_mention_form(adj, wide, 1.0, inv_root(adj)) is None


def test_route2_graph_stores_its_co_occurrence_cliques_as_a_product(store: GraphStore) -> None:
    """Through the store: chunks mention entities and link them pairwise, as the entity
    graph writes them; the PPR graph keeps those cliques as a product and ranks exactly as
    the full matrix does."""
    rng = np.random.default_rng(11)
    nodes: list[Node] = [ent(f"e{i:03d}") for i in range(120)]
    edges: list[Edge] = []
    for c in range(30):
        cid = f"c{c:02d}"
        nodes.append(Node(id=cid, label=Label.CHUNK, group=GROUP, doc_id=f"d{c}", props={"text": f"chunk {c}"}))
        members = sorted(rng.choice(120, 10, replace=False).tolist())
        edges += [Edge(src=cid, dst=f"ent:e{m:03d}", type=EdgeType.MENTIONS, group=GROUP) for m in members]
        edges += [rel(f"e{a:03d}", f"e{b:03d}", EdgeType.CO_OCCURS) for i, a in enumerate(members) for b in members[i + 1 :]]
    store.write(GROUP, nodes=nodes, edges=edges)
    g = typed_graph(store, GROUP, PathWeights())
    assert g.symmetric.low is not None
    plain = TypedGraph(g.ids, g.index, g.adjacency, g.transition, g.dangling, g.is_entity)
    teleport = np.zeros(len(g.ids))
    teleport[g.index["ent:e003"]] = 1.0
    a, b = cg_pagerank(plain, teleport), cg_pagerank(g, teleport)
    assert a.iterations == b.iterations
    np.testing.assert_array_equal(np.argsort(-settle_ties(a.scores), kind="stable"), np.argsort(-settle_ties(b.scores), kind="stable"))
    assert np.abs(a.scores - b.scores).sum() < 1e-13


@given(
    hs.lists(hs.sampled_from([0.0, 0.1, 0.25, 0.5, 0.75, 1.0]), min_size=0, max_size=60),
    hs.integers(min_value=1, max_value=20),
)
def test_top_positive_matches_a_stable_sort(scores: list[float], k: int) -> None:
    """Few distinct values, so most draws tie at the boundary: the partition must keep the
    lower index among equal scores, as the full stable sort does, and never rank a zero."""
    s = np.asarray(scores, dtype=np.float64)
    expected = [int(i) for i in np.argsort(-s, kind="stable")[:k] if s[i] > 0]
    assert top_positive(s, k) == expected
