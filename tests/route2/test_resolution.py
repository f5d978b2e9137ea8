"""Seed resolution of route2_local: spelling and number variants, a stricter cascade for the
question's noun phrases, numbers kept by loose matches, node specificity. A small hand-made
lexicon in the real embedded store."""

from __future__ import annotations

import pytest
from graphroute.core.api.models import Node
from graphroute.core.api.stage import QueryState
from graphroute.core.api.store import GraphStore
from graphroute.plugins.seeds.entity_seeds import (
    NOUN_PHRASES_KEY,
    NerSeeds,
    SeedResolution,
    offline_name_kinds,
    variant_key,
)

from .conftest import GROUP, context, ent

# route2_local's cascades
NAMES = ["exact", "normalized", "alias", "variant", "fuzzy", "substring", "embedding"]
PHRASES = ["exact", "normalized", "alias", "variant", "inner", "embedding"]


def _with_chunks(node: Node, chunks: int) -> Node:
    node.props["chunk_count"] = chunks
    return node


@pytest.fixture
def lex(store: GraphStore) -> GraphStore:
    store.write(
        GROUP,
        nodes=[
            ent("travel request", name="travel request", mentions=2),
            ent("aschenbrödel", name="Aschenbrödel", mentions=1),
            ent("country", name="country", mentions=40),
            ent("start date", name="start date", mentions=3),
            ent("availability target", name="availability target", mentions=2),
            ent("sev3 incident", name="SEV3 incident", mentions=4),
            _with_chunks(ent("iowa", name="Iowa", mentions=30), 30),
            _with_chunks(ent("intrepid wind farm", name="Intrepid Wind Farm", mentions=2), 2),
        ],
    )
    return store


def resolve(store: GraphStore, names: list[str], phrases: set[str] = frozenset(), **params: object) -> list[tuple[str, str | None, str]]:  # type: ignore[assignment]
    st = QueryState("q", GROUP)
    st.seed_names = list(names)
    st.extras[NOUN_PHRASES_KEY] = set(phrases)
    c = context(store)
    SeedResolution(SeedResolution.Params(**params)).run(st, c)  # type: ignore[arg-type]
    return [(s.name, s.node_id, s.strategy) for s in st.seeds]


def test_variant_key_folds_accents_and_plural_endings() -> None:
    assert variant_key("travel requests") == variant_key("travel request") == "travel request"
    assert variant_key("aschenbrodel") == variant_key("aschenbrödel")
    assert variant_key("policies") == "policy" and variant_key("branches") == "branch"
    # words that end in s without being plurals keep it
    assert variant_key("bus status") == "bus status"


def test_variant_resolves_plural_and_accent_spellings(lex: GraphStore) -> None:
    got = resolve(lex, ["travel requests", "Aschenbrodel"], strategies=NAMES)
    assert got == [("travel requests", "ent:travel request", "variant"), ("Aschenbrodel", "ent:aschenbrödel", "variant")]


def test_a_noun_phrase_skips_fuzzy_and_containing_names(lex: GraphStore) -> None:
    # the reference cascade takes the near spelling and the longer name containing the word
    assert resolve(lex, ["county", "date"]) == [("county", "ent:country", "fuzzy"), ("date", "ent:start date", "substring")]
    # as noun phrases under route2_local's cascade neither resolves
    assert resolve(lex, ["county", "date"], {"county", "date"}, strategies=NAMES, noun_phrase_strategies=PHRASES) == []
    # the same words as names (capitalised in the question) keep the full cascade
    assert resolve(lex, ["county"], set(), strategies=NAMES, noun_phrase_strategies=PHRASES) == [
        ("county", "ent:country", "fuzzy")
    ]


def test_a_noun_phrase_resolves_to_the_longest_entity_inside_it(lex: GraphStore) -> None:
    got = resolve(lex, ["monthly availability target"], {"monthly availability target"}, strategies=NAMES, noun_phrase_strategies=PHRASES)
    assert got == [("monthly availability target", "ent:availability target", "inner")]


def test_strict_numbers_keep_a_name_from_its_neighbour_with_another_number(lex: GraphStore) -> None:
    assert resolve(lex, ["SEV1 incident"], strategies=["exact", "fuzzy"]) == [("SEV1 incident", "ent:sev3 incident", "fuzzy")]
    assert resolve(lex, ["SEV1 incident"], strategies=["exact", "fuzzy"], strict_numbers=True) == []


def test_specificity_divides_a_seed_by_the_chunks_that_mention_it(lex: GraphStore) -> None:
    st = QueryState("q", GROUP)
    st.seed_names = ["Iowa", "Intrepid Wind Farm"]
    SeedResolution(SeedResolution.Params(specificity=True)).run(st, context(lex))
    assert {s.node_id: s.weight for s in st.seeds} == {"ent:iowa": pytest.approx(1 / 30), "ent:intrepid wind farm": pytest.approx(1 / 2)}


def test_ner_seeds_mark_the_names_that_came_from_noun_phrases(store: GraphStore) -> None:
    names, phrases = offline_name_kinds("Who approves travel requests?")
    assert names == ["travel requests"] and phrases == {"travel requests"}
    names, phrases = offline_name_kinds("Where did Carl Rogers study psychology?", "fallback")
    assert names == ["Carl Rogers"] and phrases == set()
    st = QueryState("Who approves travel requests?", GROUP)
    NerSeeds().run(st, context(store))
    assert st.seed_names == ["travel requests"] and st.extras[NOUN_PHRASES_KEY] == {"travel requests"}


def test_weight_by_match_lets_a_loose_match_teleport_less_than_an_exact_one(lex: GraphStore) -> None:
    def weights(**params: object) -> dict[str, float]:
        st = QueryState("q", GROUP)
        st.seed_names = ["travel request", "Aschenbrodel", "SEV4 incident"]
        st.extras[NOUN_PHRASES_KEY] = set()
        SeedResolution(SeedResolution.Params(strategies=["exact", "variant", "fuzzy"], **params)).run(st, context(lex))  # type: ignore[arg-type]
        return {f"{s.name}/{s.strategy}": s.weight for s in st.seeds}

    flat = weights()
    assert set(flat) == {"travel request/exact", "Aschenbrodel/variant", "SEV4 incident/fuzzy"}
    assert set(flat.values()) == {1.0}  # off: every match weighs the same
    scaled = weights(weight_by_match=True)
    # exact and variant (a spelling of the same name) keep full weight; a fuzzy match weighs its ratio
    assert scaled["travel request/exact"] == scaled["Aschenbrodel/variant"] == 1.0
    assert 0.5 < scaled["SEV4 incident/fuzzy"] < 1.0
