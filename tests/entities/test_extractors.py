"""Extractors: replay of recorded OpenIE output, spaCy (the real model), LLM OpenIE through
the real openai SDK against the loopback OpenAI-compatible server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from graphroute.core.api.components import LLMClient
from graphroute.core.lib.entities import normalize_name
from graphroute.core.registry import get_registry
from graphroute.plugins.extractors.builtin import (
    LLMOpenIEExtractor,
    OpenIECache,
    ReplayExtractor,
    SpacyExtractor,
    parse_openie,
)

from tests.servers.fake_apis import FakeOpenAI, Reply

MUSIQUE = Path("/work/shared/datasets/musique")
OPENIE = MUSIQUE / "openie_gpt-3.5-turbo.json"
needs_musique = pytest.mark.skipif(not OPENIE.is_file(), reason="musique dataset not present")


@pytest.fixture(scope="module")
def recorded() -> list[dict]:
    return json.loads(OPENIE.read_text(encoding="utf-8"))["docs"]


@needs_musique
def test_replay_returns_recorded_entities_and_triples(recorded: list[dict]) -> None:
    docs = recorded[:3] + recorded[500:502]
    ex = ReplayExtractor(ReplayExtractor.Params(path=str(OPENIE)))
    # plain text, title + text (the way a corpus passage is stored) and whitespace variants
    texts = [
        docs[0]["text"],
        f"{docs[1]['title']}\n{docs[1]['text']}",
        "  " + docs[2]["text"].replace(" ", "  "),
    ]
    texts += [d["text"] for d in docs[3:]]
    out = ex.extract(texts, titles=[d["title"] for d in docs])
    for d, got in zip(docs, out, strict=True):
        assert got.entities == d["extracted_entities"]
        want = [tuple(t) for t in d["extracted_triples"] if len(t) == 3]
        assert got.triples == want
    assert ex.stats["replay_hits"] == 5 and ex.stats["replay_misses"] == 0


@needs_musique
def test_replay_counts_misses_and_skips_malformed_triples(recorded: list[dict]) -> None:
    ex = ReplayExtractor(ReplayExtractor.Params(path=str(OPENIE)))
    out = ex.extract(["A passage nobody recorded.", recorded[0]["text"] + " Extra sentence."])
    assert [o.entities for o in out] == [[], []]
    assert ex.stats["replay_misses"] == 2
    # the file has triples with two elements; they are dropped, not passed on
    bad = next(d for d in recorded if any(len(t) != 3 for t in d["extracted_triples"]))
    (got,) = ex.extract([bad["text"]])
    assert all(len(t) == 3 for t in got.triples)
    assert len(got.triples) == sum(1 for t in bad["extracted_triples"] if len(t) == 3)
    assert ex.stats["replay_malformed_triples_in_file"] > 0


def test_replay_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    ex = ReplayExtractor(ReplayExtractor.Params(path=str(tmp_path / "nope.json")))
    with pytest.raises(FileNotFoundError, match="replay file not found"):
        ex.extract(["x"])


def test_spacy_extracts_names_and_filtered_noun_phrases() -> None:
    ex = SpacyExtractor()
    (a, b) = ex.extract(
        [
            "Marie Curie was born in Warsaw. She won the Nobel Prize in Physics with Pierre Curie.",
            "It was good. They said that.",
        ]
    )
    norms = {normalize_name(e) for e in a.entities}
    assert {"marie curie", "warsaw", "pierre curie"} <= norms
    assert not a.triples  # spaCy gives no triples: the graph builder uses co-occurrence
    # pronouns, determiners and bare common nouns are not entities
    assert not ({"she", "it", "they", "that"} & norms)
    assert b.entities == []
    assert len(set(map(str.casefold, a.entities))) == len(a.entities)  # distinct per text


def test_spacy_excluded_labels_are_configurable() -> None:
    text = ["The company sold 300 cars to 5 dealers in France."]
    default = SpacyExtractor().extract(text)[0].entities
    keep_all = SpacyExtractor(SpacyExtractor.Params(exclude_labels=[])).extract(text)[0].entities
    assert "300" in keep_all and "300" not in default
    # quantities do not come back through noun phrases either ("300 cars" -> "cars" -> dropped)
    assert not any(e[0].isdigit() for e in default)


def test_parse_openie_tolerates_fences_and_drops_bad_triples() -> None:
    got = parse_openie(
        '```json\n{"entities": ["A", " B "], "triples": [["A", "r", "B"], ["A", "r"], [1, 2, 3]]}\n```'
    )
    assert got.entities == ["A", "B"] and got.triples == [("A", "r", "B")]
    with pytest.raises(ValueError):
        parse_openie('{"entities": "not a list"}')
    with pytest.raises(ValueError):
        parse_openie("no json here")


def test_openie_cache_round_trip_and_torn_line(tmp_path: Path) -> None:
    from graphroute.core.api.components import Extraction

    c = OpenIECache(tmp_path, "model/x")
    k = OpenIECache.key("text", "title")
    assert k != OpenIECache.key("text", None)
    c.put_many({k: Extraction(entities=["A"], triples=[("A", "r", "B")])})
    with c.path.open("a") as f:
        f.write('{"key": "torn')  # a crash mid-write
    again = OpenIECache(tmp_path, "model/x")
    assert len(again) == 1
    hit = again.get(k)
    assert hit is not None and hit.triples == [("A", "r", "B")]


def _openai(server: FakeOpenAI, tmp_path: Path) -> LLMClient:
    cls = get_registry().llm_clients.get("openai")
    return cls(
        cls.Params(
            model="fake-openie",
            base_url=server.url + "/v1",
            cache_dir=str(tmp_path / "llm"),
            max_retries=1,
            backoff_s=0.0,
        )
    )


def _answer(body: dict) -> str:
    passage = body["messages"][-1]["content"]
    names = [w for w in ("Alice", "Bob", "Paris") if w in passage]
    triples = [[names[0], "knows", n] for n in names[1:]]
    return json.dumps({"entities": names, "triples": triples})


def test_llm_openie_extracts_caches_and_batches(
    fake_openai: FakeOpenAI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    fake_openai.responder = _answer
    ex = LLMOpenIEExtractor(LLMOpenIEExtractor.Params(batch_size=2, concurrency=2))
    ex.bind(llm=_openai(fake_openai, tmp_path), cache_dir=tmp_path / "cache")
    texts = ["Alice met Bob in Paris.", "Bob lives in Paris.", "Nothing here.", "Alice and Bob."]
    out = ex.extract(texts)
    assert out[0].entities == ["Alice", "Bob", "Paris"]
    assert ("Alice", "knows", "Bob") in out[0].triples
    assert out[2].entities == []
    assert fake_openai.count("/chat/completions") == 4
    # a second extractor (new process, say) answers from the disk cache, no request
    again = LLMOpenIEExtractor(LLMOpenIEExtractor.Params(use_cache=True))
    again.bind(llm=_openai(fake_openai, tmp_path / "other"), cache_dir=tmp_path / "cache")
    assert [o.entities for o in again.extract(texts)] == [o.entities for o in out]
    assert fake_openai.count("/chat/completions") == 4
    assert again.stats["cache_hits"] == 4


def test_llm_openie_retries_malformed_json_once_then_gives_up(
    fake_openai: FakeOpenAI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    fake_openai.script = [
        Reply(content="{not json"),
        Reply(content='{"entities": ["Alice"], "triples": []}'),
    ]
    ex = LLMOpenIEExtractor()
    ex.bind(llm=_openai(fake_openai, tmp_path), cache_dir=tmp_path / "cache")
    (ok,) = ex.extract(["Alice."])
    assert ok.entities == ["Alice"] and fake_openai.count("/chat/completions") == 2

    fake_openai.reset()
    fake_openai.default = Reply(content="still {not json")
    ex2 = LLMOpenIEExtractor()
    ex2.bind(llm=_openai(fake_openai, tmp_path / "b"), cache_dir=tmp_path / "cache")
    (bad,) = ex2.extract(["Bob went home."])
    assert bad.entities == [] and bad.triples == []
    assert ex2.stats["malformed_answers"] == 1
    assert fake_openai.count("/chat/completions") == 2  # one try + one retry, no more
    # a failure is not cached: the next run asks again
    fake_openai.default = Reply(content='{"entities": ["Bob"], "triples": []}')
    ex3 = LLMOpenIEExtractor()
    ex3.bind(llm=_openai(fake_openai, tmp_path / "c"), cache_dir=tmp_path / "cache")
    assert ex3.extract(["Bob went home."])[0].entities == ["Bob"]


def test_llm_openie_without_client_says_how_to_configure() -> None:
    with pytest.raises(RuntimeError, match="GRAPHROUTE_LLM"):
        LLMOpenIEExtractor().extract(["x"])
