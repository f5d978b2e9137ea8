"""Seed names from the question, the six-strategy resolution cascade, community peers."""

from __future__ import annotations

import random
import sys

import numpy as np
import pytest
from graphroute.core.api.models import Edge, EdgeType, Label, Node, Seed
from graphroute.core.api.stage import QueryState
from graphroute.core.api.store import GraphStore
from graphroute.plugins.seeds import entity_seeds
from graphroute.plugins.seeds.communities import top_peers
from graphroute.plugins.seeds.entity_seeds import (
    CommunityPeers,
    NerSeeds,
    SeedResolution,
    offline_names,
    parse_llm_names,
    torch_products,
)

from .conftest import GROUP, context, ent


def test_offline_names_cast_a_wide_net() -> None:
    names = offline_names("When did Carl Rogers develop person-centered therapy?")
    assert names[0] == "Carl Rogers" and "person-centered therapy" in names
    title = offline_names("What is the birthplace of the author of The Old Man and the Sea?")
    assert "The Old Man and the Sea" in title and "author" in title
    assert not any(n.lower().startswith(("what", "when", "who")) for n in title)


_SENTENCES = [
    "When did Carl Rogers develop person-centered therapy?",
    "What is the capital of the country where the Bank of America is headquartered?",
    "The Old Man and the Sea was written by Ernest Hemingway in Cuba in 1951.",
    "Harris W. Fawell served in the United States House of Representatives from Illinois.",
]


@pytest.mark.torch  # torch is in the torch extra only: run by make test-torch
def test_the_question_pipeline_multiplies_with_torch_and_annotates_as_thinc_does() -> None:
    """Every layer of the question's pipeline is on the torch-products backend, and the
    entities, tags, parses and noun chunks are those of spaCy's own backend."""
    pytest.importorskip("torch")
    import spacy
    from thinc.api import NumpyOps, set_current_ops

    ops = entity_seeds._ops()
    assert type(ops).__name__ == "TorchProducts"
    nlp = entity_seeds._nlp()
    layers = [layer for _, pipe in nlp.pipeline if getattr(pipe, "model", None) is not None for layer in pipe.model.walk()]
    assert layers and all(layer.ops is ops for layer in layers)
    plain = spacy.load(entity_seeds.SPACY_MODEL)

    def annotations(doc: object) -> object:
        return (
            [(e.start, e.end, e.label_) for e in doc.ents],  # type: ignore[attr-defined]
            [(t.tag_, t.pos_, t.dep_, t.head.i) for t in doc],  # type: ignore[attr-defined]
            [(c.start, c.end) for c in doc.noun_chunks],  # type: ignore[attr-defined]
        )

    for text in _SENTENCES:
        set_current_ops(ops)
        mine = annotations(nlp(text, disable=["lemmatizer"]))
        set_current_ops(NumpyOps())
        assert mine == annotations(plain(text, disable=["lemmatizer"]))


@pytest.mark.torch  # torch is in the torch extra only: run by make test-torch
def test_torch_products_multiply_as_numpy_does() -> None:
    pytest.importorskip("torch")
    ops = torch_products()
    assert ops is not None
    rng = np.random.default_rng(3)
    x, y = rng.random((15, 96), dtype=np.float32), rng.random((288, 96), dtype=np.float32)
    np.testing.assert_allclose(ops.gemm(x, y, trans2=True), x @ y.T, rtol=1e-5)
    np.testing.assert_allclose(ops.gemm(x.T.copy(), y.T.copy(), trans1=True), x @ y.T, rtol=1e-5)
    out = np.zeros((15, 288), dtype=np.float32)
    assert ops.gemm(x, y, out=out, trans2=True) is out
    np.testing.assert_allclose(out, x @ y.T, rtol=1e-5)
    with pytest.MonkeyPatch.context() as mp:
        mp.setitem(sys.modules, "torch", None)  # `import torch` fails: thinc's own backend
        assert torch_products() is None


def test_ner_seeds_offline_top_k(store: GraphStore) -> None:
    st = QueryState("What is the capital of the country where the Bank of America is headquartered?", GROUP)
    c = context(store)
    NerSeeds(NerSeeds.Params(top_k=2)).run(st, c)
    assert len(st.seed_names) == 2 and c.stats["mode"] == "offline"


def test_parse_llm_names() -> None:
    assert parse_llm_names('{"entities": ["Carl Rogers", " Rogerian therapy "]}') == ["Carl Rogers", "Rogerian therapy"]
    assert parse_llm_names('["a", 3]') == ["a", "3"]


@pytest.fixture
def lex_store(store: GraphStore) -> GraphStore:
    from graphroute.core.query.services import Services

    nodes = [
        ent("carl rogers", name="Carl Rogers", mentions=5),
        ent("new york city", name="New York City", aliases=["NYC", "New York City"], mentions=9),
        ent("rogerian psychotherapy", name="Rogerian psychotherapy", mentions=2),
        ent("car", name="Car", mentions=3),
        ent("banana", name="Banana", mentions=1),
    ]
    emb = Services(store, GROUP).embedder()
    vecs = emb.embed([str(n.props["name"]) for n in nodes])
    store.write(GROUP, nodes=nodes, vectors={"entity": ([n.id for n in nodes], vecs)})
    # the alias index keys on the alias's normalised form; make one that differs from the norm
    return store


@pytest.mark.parametrize(
    ("name", "node", "strategy"),
    [
        ("Carl Rogers", "ent:carl rogers", "exact"),
        ("carl ROGERS", "ent:carl rogers", "normalized"),
        ("NYC", "ent:new york city", "alias"),
        ("Carl Roger", "ent:carl rogers", "fuzzy"),
        ("the famous Rogerian psychotherapy school", "ent:rogerian psychotherapy", "substring"),
        ("automobile", "ent:car", "embedding"),
    ],
)
def test_cascade_reports_the_strategy(lex_store: GraphStore, name: str, node: str, strategy: str) -> None:
    st = QueryState("q", GROUP)
    st.seed_names = [name]
    c = context(lex_store)
    SeedResolution().run(st, c)
    assert [(s.node_id, s.strategy) for s in st.seeds] == [(node, strategy)]
    assert c.stats["seeds"][0]["strategy"] == strategy and c.stats["by_strategy"] == {strategy: 1}


def test_cascade_order_is_configurable_and_unresolved_reported(lex_store: GraphStore) -> None:
    st = QueryState("q", GROUP)
    st.seed_names = ["Carl Roger", "zzzz qqqq"]
    c = context(lex_store)
    SeedResolution(SeedResolution.Params(strategies=["exact", "normalized"])).run(st, c)
    assert st.seeds == [] and c.stats["unresolved"] == ["Carl Roger", "zzzz qqqq"]


def test_two_names_one_node_give_one_seed(lex_store: GraphStore) -> None:
    st = QueryState("q", GROUP)
    st.seed_names = ["Carl Rogers", "carl rogers"]
    SeedResolution().run(st, context(lex_store))
    assert len(st.seeds) == 1


def communities(store: GraphStore, members: dict[int, list[str]], lists: int | None = None) -> None:
    """Community nodes and BELONGS_TO edges as the communities step writes them; with
    ``lists``, each node also lists its first ``lists`` members by links (and every entity
    carries its ``links``), else the stages rank the members themselves."""
    links = {e: 0 for ms in members.values() for e in ms}
    pairs = {tuple(sorted((e.src, e.dst))) for e in store.iter_edges(GROUP, [EdgeType.RELATION, EdgeType.CO_OCCURS]) if e.src != e.dst}
    for a, b in pairs:
        links[a] = links.get(a, 0) + 1
        links[b] = links.get(b, 0) + 1
    nodes, edges = [], []
    for c, ms in members.items():
        props: dict[str, object] = {"community": c, "size": len(ms)}
        if lists is not None:
            props["peer_ids"] = sorted(ms, key=lambda e: (-links.get(e, 0), e))[:lists]
        nodes.append(Node(id=f"comm:{c}", label=Label.COMMUNITY, group=GROUP, props=props))
        edges += [Edge(src=e, dst=f"comm:{c}", type=EdgeType.BELONGS_TO, group=GROUP) for e in ms]
    if lists is not None:
        for n in store.get_nodes(GROUP, list(links)):
            n.props["links"] = links[n.id]
            nodes.append(n)
    store.write(GROUP, nodes=nodes, edges=edges)


def test_community_peers_add_top_degree_members(store: GraphStore) -> None:
    nodes = [ent("s", community=1), ent("hub", community=1), ent("mid", community=1), ent("leaf", community=1), ent("other", community=2)]
    edges = [Edge(src="ent:hub", dst=f"ent:{x}", type=EdgeType.RELATION, group=GROUP) for x in ("s", "mid", "leaf", "other")]
    edges.append(Edge(src="ent:mid", dst="ent:leaf", type=EdgeType.CO_OCCURS, group=GROUP))
    edges.append(Edge(src="ent:mid", dst="ent:other", type=EdgeType.CO_OCCURS, group=GROUP))
    store.write(GROUP, nodes=nodes, edges=edges)
    communities(store, {1: ["ent:s", "ent:hub", "ent:mid", "ent:leaf"], 2: ["ent:other"]})
    st = QueryState("q", GROUP)
    st.seeds = [Seed(name="s", node_id="ent:s", weight=1.0)]
    c = context(store)
    CommunityPeers(CommunityPeers.Params(peers=2, weight=0.5)).run(st, c)
    added = [(s.node_id, s.weight, s.strategy) for s in st.seeds[1:]]
    assert added == [("ent:hub", 0.5, "community_peer"), ("ent:mid", 0.5, "community_peer")]
    assert c.stats["communities"] == ["comm:1"]
    assert c.stats["peers"] == [{"node": "ent:hub", "degree": 4}, {"node": "ent:mid", "degree": 3}]


@pytest.mark.parametrize("lists", [None, 64, 3])
def test_community_top_peers_match_sorting_the_members(store: GraphStore, lists: int | None) -> None:
    """The peers read from the communities' nodes (their lists, whole or too short for the
    question, or none: the members through BELONGS_TO) are what sorting every member of
    the communities by distinct neighbours gives."""
    rng = random.Random(3)
    names = [f"e{i:03d}" for i in range(120)]
    nodes = [ent(n) for n in names]
    edges = [Edge(src=f"ent:{rng.choice(names)}", dst=f"ent:{rng.choice(names)}", type=EdgeType.RELATION, group=GROUP) for _ in range(400)]
    store.write(GROUP, nodes=nodes, edges=edges)
    membership = {f"ent:{n}": rng.randrange(5) for n in names}
    by_comm = {c: sorted(e for e, k in membership.items() if k == c) for c in range(5)}
    communities(store, by_comm, lists)
    pairs = {tuple(sorted((e.src, e.dst))) for e in edges if e.src != e.dst}
    degree = {e: sum(e in p for p in pairs) for e in membership}
    for trial in range(30):
        comms = rng.sample(range(6), rng.randint(1, 3))  # community 5 has no node
        exclude = {f"ent:{n}" for n in rng.sample(names, rng.randint(0, 40))}
        n = rng.randint(1, 30)
        members = {m for c in comms for m in by_comm.get(c, [])}
        expected = sorted((m for m in members if m not in exclude), key=lambda m: (-degree[m], m))[:n]
        got = top_peers(store, GROUP, [f"comm:{c}" for c in comms], exclude, n)
        assert [m for m, _ in got] == expected, trial
        assert all(links == degree[m] for m, links in got)


def test_dates_and_amounts_are_no_names_to_start_from() -> None:
    """A question's dates are left out like its numbers: "the end of June 2024" or "daily"
    resolve to date entities every dated passage mentions. The stage's skip_entity_types
    brings them back."""
    old = frozenset({"CARDINAL", "MONEY", "ORDINAL", "PERCENT", "QUANTITY", "TIME"})
    question = "What did daily water demand fall to after the heavy rain at the end of June 2024?"
    assert not any("2024" in n or n == "daily" for n in offline_names(question, "fallback"))
    assert {"daily", "the end of June 2024"} <= set(offline_names(question, "fallback", skip=old))
    meeting = "Who chaired the 5 June 2024 meeting at Sedge Lane?"
    assert "Sedge Lane" in offline_names(meeting, "fallback")
    assert not any("2024" in n for n in offline_names(meeting, "fallback"))


def test_the_reference_route_keeps_dates_as_names() -> None:
    """route2_reference reproduces its measured figures: dates stay names there."""
    from graphroute.core.config.resolve import load_route
    from graphroute.core.registry import get_registry

    def skipped(route: str) -> list[str]:
        stage = next(s for s in load_route(route, get_registry()).stages() if s.spec.key == "ner_seeds")
        return list(stage.params.skip_entity_types)

    assert "DATE" not in skipped("route2_reference") and "DATE" not in skipped("route2_skeleton_reference")
    assert "DATE" in skipped("route2_local") and "DATE" in skipped("route5_unified")
