"""The fast look-ups behind seed_resolution return exactly what the scans they replace
returned: fuzzy matches (difflib over every name), whole-word names inside a seed name and
names containing it. Checked on the real entity names of the MuSiQue OpenIE file and on
generated names, against the brute-force definitions kept here."""

from __future__ import annotations

import ast
import difflib
import json
import random
from functools import lru_cache
from pathlib import Path

import pytest
from graphroute.core.lib.entities import normalize_name
from graphroute.plugins.seeds.entity_seeds import Lexicon, _contains_words
from hypothesis import given, settings
from hypothesis import strategies as st

OPENIE = Path("/work/shared/datasets/musique/openie_gpt-3.5-turbo.json")


def make_lexicon(norms: list[str]) -> Lexicon:
    lex = Lexicon()
    for i, n in enumerate(sorted(set(norms))):
        lex.norm_ids[n] = f"ent:{i}"
    lex.norms = sorted(lex.norm_ids)
    return lex


@lru_cache(maxsize=1)
def musique_norms() -> list[str]:
    if not OPENIE.is_file():
        pytest.skip("MuSiQue OpenIE file not available")
    data = json.loads(OPENIE.read_text(encoding="utf-8"))
    names: set[str] = set()
    for doc in data["docs"]:
        ents = doc["extracted_entities"]
        names.update(normalize_name(str(e)) for e in (ast.literal_eval(ents) if isinstance(ents, str) else ents))
    return sorted(n for n in names if n)[:6000]


def typo(rng: random.Random, s: str) -> str:
    chars = list(s)
    for _ in range(rng.randint(0, 2)):
        op = rng.randint(0, 2)
        pos = rng.randrange(len(chars) + 1)
        if op == 0:
            chars.insert(pos, rng.choice("abcdefghijklmnopqrstuvwxyz "))
        elif chars and op == 1:
            del chars[min(pos, len(chars) - 1)]
        elif chars:
            chars[min(pos, len(chars) - 1)] = rng.choice("aeiou")
    return "".join(chars).strip() or s


def queries(norms: list[str], n: int, seed: int = 5) -> list[str]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        a, b = rng.choice(norms), rng.choice(norms)
        out += [a, typo(rng, a), f"{a} {b}", a.split(" ")[-1], f"the {a} of {b.split(' ')[0]}"]
    return out


def test_musique_names_same_results_as_the_scans() -> None:
    norms = musique_norms()
    lex = make_lexicon(norms)
    for q in queries(lex.norms, 60):
        for cutoff in (0.85, 0.6):
            assert lex.close_matches(q, 3, cutoff) == difflib.get_close_matches(q, lex.norms, n=3, cutoff=cutoff), q
        assert lex.inner_names(q, 4) == [c for c in lex.norms if len(c) >= 4 and c != q and _contains_words(q, c)], q
        assert lex.outer_names(q) == [c for c in lex.norms if _contains_words(c, q)], q


words = st.text(alphabet="abcé -'", min_size=1, max_size=12)


@settings(max_examples=150, deadline=None)
@given(st.lists(words, min_size=1, max_size=30), words, st.floats(0.5, 1.0))
def test_generated_names_same_results_as_the_scans(names: list[str], q: str, cutoff: float) -> None:
    # odd spacing on purpose (leading, trailing, doubled spaces): the token runs must agree
    lex = make_lexicon(names)
    assert lex.close_matches(q, 3, cutoff) == difflib.get_close_matches(q, lex.norms, n=3, cutoff=cutoff)
    assert lex.inner_names(q, 1) == [c for c in lex.norms if len(c) >= 1 and c != q and _contains_words(q, c)]
    assert lex.outer_names(q) == [c for c in lex.norms if _contains_words(c, q)]


def test_names_reaching_the_embedding_strategy_share_one_model_call(tmp_path: Path) -> None:
    from graphroute.core.api.models import Label, Node
    from graphroute.core.api.stage import QueryState, StageContext
    from graphroute.core.engine import open_store
    from graphroute.core.query.services import Services
    from graphroute.plugins.seeds.entity_seeds import SeedResolution

    store = open_store(str(tmp_path / "store"))
    try:
        names = ["Carl Rogers", "Car", "Banana", "Violin"]
        nodes = [
            Node(id=f"ent:{n.lower()}", label=Label.ENTITY, group="g",
                 props={"name": n, "norm": n.lower(), "mention_count": 1, "aliases": [n]})
            for n in names
        ]
        svc = Services(store, "g")
        store.write("g", nodes=nodes, vectors={"entity": ([n.id for n in nodes], svc.embedder().embed(names))})
        asked = ["Carl Rogers", "automobile", "fiddle", "automobile", "zzzz qqqq"]

        def run(seed_names: list[str]) -> tuple[list[tuple[str | None, str | None]], int]:
            services = Services(store, "g", embedder=svc.embedder())
            before = services.embedder().calls  # type: ignore[attr-defined]
            st = QueryState("q", "g")
            st.seed_names = list(seed_names)
            SeedResolution().run(st, StageContext(services=services, stage_id="t"))
            return [(s.node_id, s.strategy) for s in st.seeds], services.embedder().calls - before  # type: ignore[attr-defined]

        together, calls = run(asked)
        assert calls == 1  # "automobile", "fiddle" and "zzzz qqqq" reach the embedding strategy together
        one_by_one = [s for n in dict.fromkeys(asked) for s in run([n])[0]]
        assert together == one_by_one
        assert ("ent:car", "embedding") in together and ("ent:carl rogers", "exact") in together
    finally:
        store.close()
