"""SeedArray: many seeds of one tier as arrays. The arrays must weigh, merge and seed PPR
exactly as the same seeds given one record each would."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from graphroute.core.api.models import Label, Node, Seed, SeedArray
from graphroute.core.api.stage import QueryState, Slot, StageContext
from graphroute.core.api.store import GraphStore
from graphroute.core.engine import open_store
from graphroute.core.query.runner import merge_states
from graphroute.core.query.services import Services
from graphroute.plugins.expanders.graph import PPR
from graphroute.plugins.seeds.tiers import PASSAGE_TIER, unify, with_specificity

from .test_passages import GROUP, two_documents

WEIGHTS = {"entity": 0.5, "structural": 0.3, "thematic": 0.2, PASSAGE_TIER: 1.0}


def test_a_seed_array_checks_its_shape_and_cannot_change() -> None:
    with pytest.raises(ValueError, match="2 node ids"):
        SeedArray(("a", "b"), np.array([1.0]), PASSAGE_TIER)
    with pytest.raises(ValueError, match="appears twice"):
        SeedArray(("a", "a"), np.array([1.0, 2.0]), PASSAGE_TIER)
    source = np.array([0.5, 0.25])
    a = SeedArray(["c1", "c2"], source, PASSAGE_TIER, "chunk_vector")  # type: ignore[arg-type]
    source[0] = 9.0  # the array holds its own copy
    assert a.weights.tolist() == [0.5, 0.25] and a.node_ids == ("c1", "c2")
    with pytest.raises(ValueError):
        a.weights[0] = 1.0
    assert copy.deepcopy(a) is a  # immutable: shared by forked states
    assert a.positive() is a
    some = SeedArray(("c1", "c2", "c3"), np.array([0.5, 0.0, 0.25]), PASSAGE_TIER, "chunk_vector").positive()
    assert some.node_ids == ("c1", "c3") and some.weights.tolist() == [0.5, 0.25] and some.strategy == "chunk_vector"
    assert a.records() == [Seed("c1", "c1", 0.5, PASSAGE_TIER, "chunk_vector"), Seed("c2", "c2", 0.25, PASSAGE_TIER, "chunk_vector")]


def _mixed(rng: np.random.Generator, n: int) -> tuple[list[Seed], list[Seed]]:
    """Entity records (one resolved twice) and ``n`` passage seeds, some on the same nodes as
    the entities, with weights that do not round nicely."""
    entities = [Seed(f"e{i}", f"ent:e{i}", float(w), "entity", "exact") for i, w in enumerate(rng.random(6))]
    entities.append(Seed("e0 again", "ent:e0", 0.3, "entity", "fuzzy"))
    structural = [Seed(f"e{i}", f"ent:e{i}", float(w), "structural", "sentences") for i, w in enumerate(rng.random(3))]
    nodes = [f"c{i}" for i in range(n)] + ["ent:e1", "ent:e5"]
    passages = [Seed(c, c, float(w), PASSAGE_TIER, "chunk_vector") for c, w in zip(nodes, rng.random(len(nodes)), strict=True)]
    passages[3] = Seed("c3", "c3", 0.0, PASSAGE_TIER, "chunk_vector")  # a zero weight seeds nothing
    return [*entities, *structural], passages


def test_unify_gives_an_array_the_weights_its_records_would_get_to_the_bit() -> None:
    records, passages = _mixed(np.random.default_rng(7), 300)
    as_records, none = unify([*records, *passages], WEIGHTS)
    arr = SeedArray(tuple(s.node_id or "" for s in passages), np.array([s.weight for s in passages]), PASSAGE_TIER, "chunk_vector")
    out_records, out_arrays = unify(records, WEIGHTS, [arr])
    assert none == []
    expected = {s.node_id: (s.weight, s.name, s.tier) for s in as_records}
    got = {s.node_id: (s.weight, s.name, s.tier) for s in [*out_records, *(s for a in out_arrays for s in a.records())]}
    assert got == expected  # exact floats, and each node named after its largest contribution
    assert "c3" not in got and sum(w for w, _, _ in got.values()) == pytest.approx(1.0)
    # a node whose largest share came from the array stays in the array; the rest are records
    assert {a.tier for a in out_arrays} == {PASSAGE_TIER}
    assert all(s.tier != PASSAGE_TIER for s in out_records)
    assert [s.weight for s in out_records] == sorted((s.weight for s in out_records), reverse=True)


def test_a_fork_shares_seed_arrays_and_the_merge_does_not_repeat_them() -> None:
    base = QueryState("q", GROUP)
    shared = SeedArray(("c1",), np.array([1.0]), PASSAGE_TIER)
    base.seed_arrays.append(shared)
    left, right = base.fork(), base.fork()
    assert left.seed_arrays[0] is shared
    mine = SeedArray(("c2", "c3"), np.array([0.5, 0.5]), PASSAGE_TIER)
    right.seed_arrays.append(mine)
    merge_states(base, [left, right], "union")
    assert base.seed_arrays == [shared, mine]
    assert base.size(Slot.SEEDS) == 3
    assert [s.node_id for s in base.all_seeds()] == ["c1", "c2", "c3"]


@pytest.fixture
def store(tmp_path: Path) -> Iterator[GraphStore]:
    s = open_store(str(tmp_path / "store"))
    yield s
    s.close()


def _ppr(store: GraphStore, st: QueryState) -> tuple[list[tuple[str, float]], dict[str, float]]:
    c = StageContext(services=Services(store, GROUP), stage_id="p")
    PPR(PPR.Params(budget=1.0)).run(st, c)
    mass = st.node_scores
    return [(e.id, e.score) for e in st.entities], {k: mass[k] for k in mass}


def test_ppr_walks_from_an_array_as_from_its_records(store: GraphStore) -> None:
    two_documents(store)
    entity = Seed("p", "ent:p", 0.2)
    arr = SeedArray(("c3", "c1", "c2"), np.array([0.5, 0.0, 0.3]), PASSAGE_TIER)
    with_records = QueryState("q", GROUP)
    with_records.seeds = [entity, *arr.records()]
    with_array = QueryState("q", GROUP)
    with_array.seeds, with_array.seed_arrays = [entity], [arr]
    ranked = _ppr(store, with_records)
    assert _ppr(store, with_array) == ranked
    # c3 (the heaviest passage seed) outweighs c1, which only the walk reaches
    assert ranked[1]["c3"] > ranked[1]["c1"] > 0
    only_array = QueryState("q", GROUP)
    only_array.seed_arrays = [arr]
    assert _ppr(store, only_array)[0] != []


def test_specificity_divides_an_entity_array_too(store: GraphStore) -> None:
    store.write(GROUP, nodes=[
        Node(id="ent:rare", label=Label.ENTITY, group=GROUP, props={"name": "Rare", "chunk_count": 1}),
        Node(id="ent:common", label=Label.ENTITY, group=GROUP, props={"name": "Common", "chunk_count": 40}),
    ], edges=[])
    entities = SeedArray(("ent:rare", "ent:common"), np.array([1.0, 1.0]), "entity")
    passages = SeedArray(("c1",), np.array([1.0]), PASSAGE_TIER)
    records, arrays = with_specificity(store, GROUP, [], [entities, passages])
    assert records == [] and arrays[1] is passages
    assert arrays[0].weights.tolist() == pytest.approx([1.0, 1 / 40])


def test_a_seed_outside_the_graph_still_ranks_beside_array_seeds(store: GraphStore) -> None:
    two_documents(store)
    store.write(GROUP, nodes=[Node(id="ent:z", label=Label.ENTITY, group=GROUP, props={"name": "Z"})], edges=[])
    st = QueryState("q", GROUP)
    st.seeds = [Seed("z", "ent:z", 0.5)]
    st.seed_arrays = [SeedArray(("c3",), np.array([0.5]), PASSAGE_TIER)]
    c = StageContext(services=Services(store, GROUP), stage_id="p")
    PPR(PPR.Params(budget=1.0)).run(st, c)
    scores = {e.id: e.score for e in st.entities}
    # the isolated seed ranks (its walk only returns to the seeds); from c3 the walk reaches
    # q, and p only through c2
    assert scores["ent:z"] > 0 and scores["ent:q"] > scores.get("ent:p", 0.0)
    assert c.stats["seeds"] == 2 and c.stats["seeds_in_graph"] == 1
