"""Seed resolution and the keyword fallback on every backend: Neo4j reads each name's
candidate entities (and the titles holding a question's words) from its name indexes, a
bounded read per question; the embedded store, or ``engine: client``, builds a lexicon of
the group in the client. Every strategy of the cascade resolves the same entity either way,
and a Neo4j group written before the indexes existed falls back to the lexicon until
``upgrade_group`` indexes it."""

from __future__ import annotations

import json

import pytest
from graphroute.core.api.models import Label, Node
from graphroute.core.api.stage import QueryState, StageContext
from graphroute.core.api.store import GraphStore
from graphroute.core.apps.cli.main import cli_app
from graphroute.core.query.services import Services
from graphroute.plugins.seeds.entity_seeds import SeedResolution
from graphroute.plugins.seeds.tiers import StructuralSeeds
from typer.testing import CliRunner

from tests.dev_neo4j import NEO4J_URI

STRATEGIES = ["exact", "normalized", "alias", "variant", "fuzzy", "substring", "embedding"]
CASES = [
    ("Carl Rogers", "ent:carl rogers", "exact"),
    ("carl ROGERS", "ent:carl rogers", "normalized"),
    ("NYC", "ent:new york city", "alias"),
    ("Aschenbrodel", "ent:aschenbrödel", "variant"),
    ("travel requests", "ent:travel request", "variant"),
    ("Karl Rogers", "ent:carl rogers", "fuzzy"),
    ("the famous Rogerian psychotherapy school", "ent:rogerian psychotherapy", "substring"),  # inner
    ("date", "ent:due date", "substring"),  # outer: the most mentioned name holding it, then the shortest
    ("automobile", "ent:car", "embedding"),
]


def ent(group: str, norm: str, name: str, mentions: int, aliases: list[str] | None = None) -> Node:
    props = {"name": name, "norm": norm, "mention_count": mentions, "aliases": aliases or [name]}
    return Node(id=f"ent:{norm}", label=Label.ENTITY, group=group, props=props)


def write_entities(store: GraphStore, group: str, crowd: str) -> None:
    nodes = [
        ent(group, "carl rogers", "Carl Rogers", 5),
        ent(group, "new york city", "New York City", 9, ["NYC", "New York City"]),
        ent(group, "rogerian psychotherapy", "Rogerian psychotherapy", 2),
        ent(group, "aschenbrödel", "Aschenbrödel", 1),
        ent(group, "travel request", "travel request", 2),
        ent(group, "car", "Car", 3),
        ent(group, "start date", "start date", 3),
        ent(group, "due date", "due date", 5),
        ent(group, "date of birth", "date of birth", 5),
    ]
    emb = Services(store, group).embedder()
    store.write(group, nodes=nodes, vectors={"entity": ([n.id for n in nodes], emb.embed([str(n.props["name"]) for n in nodes]))})
    # another group with the same words, mentioned far more: never a candidate of the first
    store.write(crowd, nodes=[ent(crowd, "date night", "date night", 100), ent(crowd, "carl rogers", "Carl Rogers", 50),
                              ent(crowd, "nyc", "NYC", 70, ["New York City"])])


def resolve(
    store: GraphStore, group: str, name: str, engine: str = "auto", **params: object
) -> tuple[list[tuple[str | None, str]], StageContext]:
    state = QueryState("q", group)
    state.seed_names = [name]
    ctx = StageContext(services=Services(store, group), stage_id="seed_resolution")
    SeedResolution(SeedResolution.Params(strategies=STRATEGIES, engine=engine, **params)).run(state, ctx)  # type: ignore[arg-type]
    return [(s.node_id, s.strategy) for s in state.seeds], ctx


def test_every_strategy_resolves_the_same_entity_from_the_store_and_the_client(store: GraphStore, make_group: object) -> None:
    group, crowd = make_group(), make_group()  # type: ignore[operator]
    write_entities(store, group, crowd)
    indexed = store.backend == "neo4j"
    for name, node, strategy in CASES:
        got, ctx = resolve(store, group, name)
        assert got == [(node, strategy)], name
        assert ctx.stats["names_from"] == ("store name index" if indexed else "client lexicon")
        assert ctx.stats["entities_in_group"] == 9
        client, cctx = resolve(store, group, name, engine="client")
        assert client == got and cctx.stats["names_from"] == "client lexicon"
    candidates = store.entity_candidates(group, "Carl Roger", fuzzy=100, outer=10)
    if not indexed:
        assert candidates is None
    else:  # the name's own candidates, none of the crowd's
        assert candidates is not None and {n.id for n in candidates} == {"ent:carl rogers", "ent:car"}  # car: carl~1
        assert [n.id for n in store.entity_candidates(group, "date", outer=2) or []] == ["ent:date of birth", "ent:due date"]
        assert store.entity_candidates(group, "?!") == []


def test_a_coordination_tagged_as_one_name_resolves_as_the_names_it_joins(store: GraphStore, make_group: object) -> None:
    group, crowd = make_group(), make_group()  # type: ignore[operator]
    write_entities(store, group, crowd)
    store.write(group, nodes=[ent(group, "procter and gamble", "Procter and Gamble", 2), ent(group, "gamble", "Gamble", 1)])
    for engine in ("auto", "client"):
        # "Carl Rogers" matches exactly, so each joined name runs its own cascade ("Aschenbrodel": variant)
        got, ctx = resolve(store, group, "Carl Rogers and Aschenbrodel", engine, split_coordinated=True)
        assert got == [("ent:carl rogers", "exact"), ("ent:aschenbrödel", "variant")], engine
        assert [s["part_of"] for s in ctx.stats["seeds"]] == ["Carl Rogers and Aschenbrodel"] * 2
        # not split (the default), the whole name finds one of the two (the longer name inside it)
        whole, _ = resolve(store, group, "Carl Rogers and Aschenbrodel", engine)
        assert whole == [("ent:carl rogers", "substring")], engine
        # an entity named with "and" matches whole
        assert resolve(store, group, "Procter and Gamble", engine, split_coordinated=True)[0] == [
            ("ent:procter and gamble", "exact")]
        # no joined name matches strictly: the whole name's cascade, as without splitting
        for name in ("Karl Rogers & Aschenbrodl", "Karl Rogers, Nyc2 and Datte"):
            assert resolve(store, group, name, engine, split_coordinated=True)[0] == resolve(store, group, name, engine)[0], name


def test_a_group_written_before_the_name_index_resolves_in_the_client_until_upgraded(store: GraphStore, make_group: object) -> None:
    if store.backend != "neo4j":
        pytest.skip("the embedded store keeps no name index")
    group, crowd = make_group(), make_group()  # type: ignore[operator]
    write_entities(store, group, crowd)
    store.write(group, nodes=[Node(id="s1", label=Label.SECTION, group=group, props={"title": "Warranty Terms"})])
    # the group as a server before the name indexes left it: no flag, no indexed columns
    store._write_tx(  # type: ignore[attr-defined]
        "test",
        lambda tx: tx.run(
            "MATCH (m:GRMeta {group: $g}) REMOVE m.name_index WITH m "
            "MATCH (n:GRNode {group: $g}) REMOVE n.p_ename, n.p_ekeys, n.p_mentions, n.p_twords",
            g=group,
        ).consume(),
    )
    assert store.entity_candidates(group, "Carl Rogers") is None and store.sections_by_title(group, ["terms"], 3) is None
    before = {name: resolve(store, group, name) for name, _, _ in CASES}
    assert all(ctx.stats["names_from"] == "client lexicon" for _, ctx in before.values())
    version = store.version(group)
    upgraded = CliRunner().invoke(cli_app(), ["upgrade", "--store", NEO4J_URI, "-g", group, "--json"])
    assert upgraded.exit_code == 0, upgraded.output
    assert json.loads(upgraded.output)["upgrades"] == [
        "indexed the names of 9 entities in gr_entity_names and the titles of 1 sections in gr_section_titles"
    ]
    assert store.version(group) > version and store.upgrade_group(group) == []
    for name, (got, _) in before.items():
        after, ctx = resolve(store, group, name)
        assert after == got and ctx.stats["names_from"] == "store name index"
    assert store.sections_by_title(group, ["terms"], 3) == [("s1", 1)]


def test_keyword_fallback_ranks_the_same_sections_on_every_store(store: GraphStore, make_group: object) -> None:
    group, crowd = make_group(), make_group()  # type: ignore[operator]
    titles = {
        "s1": "Warranty Terms", "s2": "Payment schedule (terms)", "s3": "warranty_extra", "s4": "Warranties",
        "s5": "Terms of the warranty, and its claims", "s6": "Claims", "s0": "Terms",
    }
    store.write(group, nodes=[Node(id=i, label=Label.SECTION, group=group, props={"title": t}) for i, t in titles.items()])
    store.write(crowd, nodes=[Node(id="a1", label=Label.SECTION, group=crowd, props={"title": "Warranty terms and claims"})])
    question = "What are the warranty terms for claims?"
    rows, engine = StructuralSeeds()._keyword_sections(store, group, question)
    # the most question words first, then by id; "warranty_extra" and "Warranties" are other words
    assert rows == [("s5", 3.0, 3), ("s1", 2.0, 2), ("s0", 1.0, 1), ("s2", 1.0, 1), ("s6", 1.0, 1)]
    assert engine == ("store title index" if store.backend == "neo4j" else "client title index")
    client = StructuralSeeds(StructuralSeeds.Params(keyword_engine="client"))._keyword_sections(store, group, question)
    assert client == (rows, "client title index")
