"""The shipped LLM routes (route1s_sentence_llm, route2_local_llm, route5_unified_llm) end to
end on a real index, their model chosen by GRAPHROUTE_LLM, by GRAPHROUTE_LLM_MODEL alone, or
by the route config; the model is the loopback server answering with the fake model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from graphroute.core.config.resolve import load_route
from graphroute.core.engine import GraphRoute
from graphroute.core.errors import LLMNotConfiguredError
from graphroute.core.registry import get_registry

from tests.llm.conftest import GROUP, OPENAI_KEY, client_params, llm_engine
from tests.servers import fake_model
from tests.servers.fake_apis import FakeOpenAI

HG = "Which element has the symbol Hg?"
LLM_ROUTES = {"route1s_sentence_llm": "route1s_sentence", "route2_local_llm": "route2_local",
              "route5_unified_llm": "route5_unified"}


@pytest.mark.parametrize("route", sorted(LLM_ROUTES))
def test_llm_route_extends_its_offline_route_and_only_swaps_the_ends(route: str) -> None:
    registry = get_registry()
    llm, offline = load_route(route, registry), load_route(LLM_ROUTES[route], registry)
    llm_stages = [(s.spec.key, s.cls.name) for s in llm.stages() if s.spec.enabled]
    offline_stages = [(s.spec.key, s.cls.name) for s in offline.stages() if s.spec.enabled]
    assert llm_stages == [*(s for s in offline_stages if s != ("extractive", "extractive")), ("synth", "llm_synthesis")]


@pytest.mark.parametrize(("route", "ner_calls"), [("route1s_sentence_llm", 0), ("route2_local_llm", 1), ("route5_unified_llm", 1)])
def test_llm_route_answers_with_citations(
    route: str, ner_calls: int, indexed: GraphRoute, fake_openai: FakeOpenAI, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch, llm_env: None,
) -> None:
    fake_model.install(fake_openai)
    g = llm_engine(indexed, fake_openai, tmp_path, monkeypatch)
    r = g.query(HG, route=route)
    assert not r.negative and "Mercury is a chemical element" in r.answer
    assert r.citations and all(c.document_id for c in r.citations)
    assert fake_openai.chat_count(fake_model.NER) == ner_calls
    assert fake_openai.chat_count(fake_model.SYNTHESIS) == 1
    assert fake_openai.count("/chat/completions") == ner_calls + 1  # the reference's budget: NER + synthesis
    ner = [t for t in r.trace if t.stage == "ner_seeds"]
    assert all(t.stats["mode"] == "llm" and t.tokens["prompt"] > 0 for t in ner)
    assert OPENAI_KEY not in json.dumps(r.to_public_json())


def test_llm_route_without_a_model_says_how_to_configure_one(
    indexed: GraphRoute, fake_openai: FakeOpenAI, llm_env: None
) -> None:
    g = GraphRoute(indexed.store, GROUP, settings=indexed.settings)
    with pytest.raises(LLMNotConfiguredError, match="GRAPHROUTE_LLM") as info:
        g.query(HG, route="route2_local_llm")
    assert "docs/models.md" in str(info.value)
    assert fake_openai.count() == 0


def test_model_name_alone_selects_the_openai_client(
    indexed: GraphRoute, fake_openai: FakeOpenAI, monkeypatch: pytest.MonkeyPatch, llm_env: None, tmp_path: Path
) -> None:
    fake_model.install(fake_openai)
    monkeypatch.setenv("GRAPHROUTE_LLM_MODEL", "gpt-4o-mini")
    monkeypatch.setenv("OPENAI_BASE_URL", fake_openai.url + "/v1")
    g = GraphRoute(indexed.store, GROUP, settings=indexed.settings)
    r = g.query(HG, route="route5_unified_llm")
    assert {q.body["model"] for q in fake_openai.requests} == {"gpt-4o-mini"}
    assert fake_openai.count("/chat/completions") == 2 and r.citations
    synth = next(t for t in r.trace if t.stage == "synth")
    assert synth.stats["model"] == "gpt-4o-mini" and synth.stats["cost_usd"] > 0


def test_the_route_config_names_the_model(
    indexed: GraphRoute, fake_openai: FakeOpenAI, llm_env: None, tmp_path: Path
) -> None:
    """No GRAPHROUTE_LLM: each LLM stage names its client and model in the config."""
    fake_model.install(fake_openai)
    params = client_params(fake_openai, tmp_path, model="my-local-model")
    g = GraphRoute(indexed.store, GROUP, settings=indexed.settings)
    ov = {"synth": {"llm": "openai", "llm_params": params}, "ner_seeds": {"llm": "openai", "llm_params": params}}
    r = g.query(HG, route="route2_local_llm", overrides=ov)
    assert [q.body["model"] for q in fake_openai.requests] == ["my-local-model", "my-local-model"]
    synth = next(t for t in r.trace if t.stage == "synth")
    assert synth.stats["model"] == "my-local-model" and "cost_usd" not in synth.stats  # not in the price table
    assert synth.tokens["prompt"] > 0 and r.citations
