"""Each LLM-driven query stage through the real openai SDK against the loopback server:
replies, malformed JSON, refusals, 429 / 5xx with retries, timeouts, and the tokens and cost
each stage records in its own trace entry."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from graphroute.core.api.constants import NOT_FOUND
from graphroute.core.api.models import QueryResult, StageTrace
from graphroute.core.engine import GraphRoute
from graphroute.core.errors import RemoteCallError
from graphroute.plugins.llm.openai_chat import DEFAULT_PRICES, cost_usd

from tests.llm.conftest import llm_engine
from tests.servers import fake_model
from tests.servers.fake_apis import FakeOpenAI, Reply

Q = "On which sea coast is the city where Johannes Hevelius worked?"


def stage(result: QueryResult, stage_id: str) -> StageTrace:
    return next(t for t in result.trace if t.stage == stage_id)


def price(prompt: int, completion: int) -> float:
    return cost_usd("gpt-4.1-mini", DEFAULT_PRICES, prompt, completion)


@pytest.fixture()
def engine(indexed: GraphRoute, fake_openai: FakeOpenAI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, llm_env: None) -> GraphRoute:
    fake_model.install(fake_openai)
    return llm_engine(indexed, fake_openai, tmp_path, monkeypatch)


# --------------------------------------------------------------------------- ner_seeds


def test_ner_names_from_the_model_with_community_summaries_and_its_cost(engine: GraphRoute, fake_openai: FakeOpenAI) -> None:
    fake_openai.script = [Reply(usage=(1234, 56))]
    r = engine.query(Q, route="route2_local")
    ner = stage(r, "ner_seeds")
    assert ner.stats["mode"] == "llm"
    assert ner.stats["names"] == ["Johannes Hevelius"]  # the fake's names: capitalised spans of the question
    assert fake_openai.chat_count(fake_model.NER) == 1 and fake_openai.count("/chat/completions") == 1
    # the hints are the nearest communities' titles AND summaries
    user = fake_openai.requests[0].body["messages"][-1]["content"]
    store = engine.store
    summaries = [str(n.props.get("summary") or "") for n in store.iter_nodes("llm", "Community")]
    assert "Topics in the documents (community summaries):" in user
    assert any(" ".join(s.split())[:40] in user for s in summaries if s)
    assert user.rstrip().endswith(f"Question: {Q}")
    # the exact usage the server reported, priced, in this stage's own trace entry
    assert ner.tokens == {"prompt": 1234, "completion": 56}
    assert ner.stats["cost_usd"] == pytest.approx(price(1234, 56), abs=1e-6)
    assert ner.stats["llm_calls"] == 1 and ner.stats["llm_cached"] is False
    # the offline synthesizer called no model and records nothing
    assert stage(r, "extractive").tokens == {}


def test_ner_titles_only_when_summaries_are_switched_off(engine: GraphRoute, fake_openai: FakeOpenAI) -> None:
    engine.query(Q, route="route2_local", overrides={"ner_seeds.hint_summary_chars": 0})
    user = fake_openai.requests[0].body["messages"][-1]["content"]
    hints = user.split("\n\nQuestion:")[0].splitlines()[1:]
    assert hints and all(": " not in h for h in hints)


def test_ner_repairs_malformed_json_once_and_counts_both_replies(engine: GraphRoute, fake_openai: FakeOpenAI) -> None:
    fake_openai.script = [Reply(content="{entities: [Johannes", usage=(100, 5)), Reply(usage=(150, 8))]
    ner = stage(engine.query(Q, route="route2_local"), "ner_seeds")
    assert ner.stats["mode"] == "llm" and ner.stats["names"] == ["Johannes Hevelius"]
    assert fake_openai.chat_count(fake_model.NER) == 2
    repair = fake_openai.requests[1].body["messages"]
    assert repair[-2] == {"role": "assistant", "content": "{entities: [Johannes"}
    assert "not valid JSON" in repair[-1]["content"]
    assert ner.tokens == {"prompt": 250, "completion": 13} and ner.stats["llm_calls"] == 2
    assert ner.stats["cost_usd"] == pytest.approx(price(250, 13), abs=1e-6)


def test_ner_falls_back_offline_after_two_malformed_replies(engine: GraphRoute, fake_openai: FakeOpenAI) -> None:
    fake_openai.script = [Reply(content="no json here", usage=(10, 3)), Reply(content='{"names": "x"}', usage=(20, 4))]
    r = engine.query(Q, route="route2_local")
    ner = stage(r, "ner_seeds")
    assert ner.stats["mode"] == "offline" and "LLMOutputError" in ner.stats["llm_error"]
    assert "Johannes Hevelius" in ner.stats["names"]  # spaCy found it
    assert ner.tokens == {"prompt": 30, "completion": 7}  # the unusable replies were still paid for
    assert fake_openai.count("/chat/completions") == 2 and r.evidence


def test_ner_refusal_is_not_repaired_and_falls_back_offline(engine: GraphRoute, fake_openai: FakeOpenAI) -> None:
    fake_openai.script = [Reply(refusal="I can't help with that request.", usage=(40, 9))]
    ner = stage(engine.query(Q, route="route2_local"), "ner_seeds")
    assert fake_openai.count("/chat/completions") == 1
    assert "LLMRefusalError" in ner.stats["llm_error"] and "can't help" in ner.stats["llm_error"]
    assert ner.stats["mode"] == "offline" and ner.tokens == {"prompt": 40, "completion": 9}


def test_ner_content_filter_stop_counts_as_a_refusal(engine: GraphRoute, fake_openai: FakeOpenAI) -> None:
    fake_openai.script = [Reply(content="", finish_reason="content_filter")]
    ner = stage(engine.query(Q, route="route2_local"), "ner_seeds")
    assert "content_filter" in ner.stats["llm_error"] and fake_openai.count("/chat/completions") == 1


def test_ner_retries_a_429_then_uses_the_reply(engine: GraphRoute, fake_openai: FakeOpenAI) -> None:
    fake_openai.script = [Reply(status=429, headers={"retry-after-ms": "10"}), Reply(status=503), Reply()]
    ner = stage(engine.query(Q, route="route2_local"), "ner_seeds")
    assert fake_openai.count("/chat/completions") == 3
    assert ner.stats["mode"] == "llm" and ner.stats["llm_calls"] == 1  # one reply, after two retries


def test_ner_gives_up_after_its_retries_and_the_query_still_answers(engine: GraphRoute, fake_openai: FakeOpenAI) -> None:
    fake_openai.default = Reply(status=500)
    r = engine.query(Q, route="route2_local")
    ner = stage(r, "ner_seeds")
    assert fake_openai.count("/chat/completions") == 3  # one try + max_retries (2)
    assert "RemoteCallError" in ner.stats["llm_error"] and "HTTP 500" in ner.stats["llm_error"]
    assert "after 2 retries" in ner.stats["llm_error"]
    assert ner.stats["mode"] == "offline" and ner.tokens == {} and r.answer


def test_ner_timeout_is_retried_then_falls_back(
    indexed: GraphRoute, fake_openai: FakeOpenAI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, llm_env: None
) -> None:
    fake_model.install(fake_openai)
    g = llm_engine(indexed, fake_openai, tmp_path, monkeypatch, timeout=0.3, max_retries=1)
    fake_openai.script = [Reply(delay=1.5), Reply()]  # the first attempt times out, the retry answers
    assert stage(g.query(Q, route="route2_local"), "ner_seeds").stats["mode"] == "llm"
    fake_openai.reset()
    fake_openai.default = Reply(delay=1.5)
    ner = stage(g.query("Which element has the symbol Hg?", route="route2_local"), "ner_seeds")
    assert "APITimeoutError" in ner.stats["llm_error"] and ner.stats["mode"] == "offline"


def test_ner_replies_are_cached_so_a_rerun_costs_nothing(engine: GraphRoute, fake_openai: FakeOpenAI) -> None:
    first = stage(engine.query(Q, route="route2_local"), "ner_seeds")
    again = stage(engine.query(Q, route="route2_local"), "ner_seeds")
    assert fake_openai.count("/chat/completions") == 1
    assert again.stats["llm_cached"] is True and "cost_usd" not in again.stats and first.stats["cost_usd"] > 0
    assert again.tokens == first.tokens and again.stats["names"] == first.stats["names"]


def test_decomposition_adds_the_sub_questions_names(engine: GraphRoute, fake_openai: FakeOpenAI) -> None:
    q = "Who catalogued stars in Danzig, and which element has the symbol Hg?"
    r = engine.query(q, route="route2_local", overrides={"ner_seeds.decompose": True, "ner_seeds.top_k": 1})
    ner = stage(r, "ner_seeds")
    assert ner.stats["sub_questions"] == ["Who catalogued stars in Danzig", "which element has the symbol Hg"]
    assert fake_openai.chat_count(fake_model.DECOMPOSE) == 1
    assert fake_openai.chat_count(fake_model.NER) == 3  # the question, then each sub-question
    # top_k (1) of the question's own names, then what only a sub-question named
    assert ner.stats["names"] == ["Danzig", "Hg"] and ner.stats["decompose_names"] == ["Hg"]
    # tokens and calls of all four replies, in the one stage entry
    assert ner.stats["llm_calls"] == 4
    assert ner.tokens["prompt"] > 0 and ner.stats["cost_usd"] == pytest.approx(
        price(ner.tokens["prompt"], ner.tokens["completion"]), abs=1e-6)


def test_decomposition_failure_keeps_the_questions_own_names(engine: GraphRoute, fake_openai: FakeOpenAI) -> None:
    fake_openai.on(fake_model.DECOMPOSE, lambda body: "not json")
    fake_openai.rules.insert(0, fake_openai.rules.pop())  # the broken rule first
    ner = stage(engine.query(Q, route="route2_local", overrides={"ner_seeds.decompose": True}), "ner_seeds")
    assert "LLMOutputError" in ner.stats["decompose_error"]
    assert ner.stats["mode"] == "llm" and ner.stats["names"] == ["Johannes Hevelius"]


# --------------------------------------------------------------------------- weight_profile


def test_weight_profile_classified_by_the_model(engine: GraphRoute, fake_openai: FakeOpenAI) -> None:
    fake_openai.on(fake_model.CLASSIFY, lambda body: json.dumps({"profile": "thematic_survey"}))
    fake_openai.rules.insert(0, fake_openai.rules.pop())
    r = engine.query(Q, route="route5_unified", overrides={"weight_profile.classifier": "llm"})
    wp = stage(r, "weight_profile")
    assert wp.stats["profile"] == "thematic_survey" and wp.stats["how"] == "llm"
    assert wp.tokens["prompt"] > 0 and wp.stats["llm_calls"] == 1
    body = next(q.body for q in fake_openai.requests if "Classify" in q.body["messages"][0]["content"])
    assert body["response_format"] == {"type": "json_object"} and body["max_tokens"] == 50


@pytest.mark.parametrize(
    ("reply", "error"),
    [
        (Reply(content='{"profile": "poetry"}'), "unknown profile 'poetry'"),
        (Reply(refusal="No."), "LLMRefusalError"),
        (Reply(status=400), "HTTP 400"),
    ],
)
def test_weight_profile_falls_back_to_offline_classification(
    engine: GraphRoute, fake_openai: FakeOpenAI, reply: Reply, error: str
) -> None:
    fake_openai.script = [reply]  # the classifier is the first call of route5_unified
    wp = stage(engine.query(Q, route="route5_unified", overrides={"weight_profile.classifier": "llm"}), "weight_profile")
    assert error in wp.stats["llm_error"]
    assert wp.stats["how"] in ("cues", "embedding", "cues+embedding", "default") and wp.stats["profile"]


# --------------------------------------------------------------------------- llm_synthesis


def test_synthesis_refusal_is_an_explicit_not_found(engine: GraphRoute, fake_openai: FakeOpenAI) -> None:
    fake_openai.script = [Reply(refusal="I won't answer that.", usage=(900, 6))]
    r = engine.query(Q, route="route1s_sentence_llm")
    synth = stage(r, "synth")
    assert r.negative and r.answer == NOT_FOUND and r.citations == []
    assert synth.stats["negative_reason"] == "model_refused" and "won't" in synth.stats["llm_refusal"]
    assert synth.tokens == {"prompt": 900, "completion": 6}


def test_synthesis_unreachable_model_fails_or_answers_offline(engine: GraphRoute, fake_openai: FakeOpenAI) -> None:
    fake_openai.default = Reply(status=503)
    with pytest.raises(RemoteCallError, match="HTTP 503"):
        engine.query(Q, route="route1s_sentence_llm")
    assert fake_openai.count("/chat/completions") == 3
    r = engine.query(Q, route="route1s_sentence_llm", overrides={"synth.fallback": "extractive"})
    synth = stage(r, "synth")
    assert synth.stats["fallback"] == "extractive" and "HTTP 503" in synth.stats["llm_error"]
    assert "Baltic" in r.answer and r.citations


def test_synthesis_answer_cites_and_records_model_endpoint_and_cost(engine: GraphRoute, fake_openai: FakeOpenAI) -> None:
    r = engine.query("Which element has the symbol Hg?", route="route1s_sentence_llm")
    synth = stage(r, "synth")
    assert r.answer.startswith("Mercury is a chemical element") and r.answer.endswith("]")
    n = int(r.answer.rsplit("[", 1)[1].rstrip("]"))
    assert [c.index for c in r.citations] == [n] and "symbol Hg" in r.citations[0].text
    assert synth.stats["model"] == "gpt-4.1-mini" and synth.stats["endpoint"] == fake_openai.url + "/v1"
    assert synth.stats["cost_usd"] == pytest.approx(price(synth.tokens["prompt"], synth.tokens["completion"]), abs=1e-6)


def test_synthesis_gets_the_thematic_tiers_community_summaries(engine: GraphRoute, fake_openai: FakeOpenAI) -> None:
    plain = engine.query(Q, route="route5_unified_llm")
    with_themes = engine.query(
        Q, route="route5_unified_llm", overrides={"synth.community_summaries": 3, "thematic_seeds.enabled": True}
    )

    def synth_prompt(n: int) -> str:
        bodies = [q.body for q in fake_openai.requests if q.body["messages"][0]["content"].startswith("You answer")]
        return str(bodies[n]["messages"][-1]["content"])

    assert "Background (summaries" not in synth_prompt(0)
    prompt = synth_prompt(1)
    thematic = next(t for t in with_themes.trace if t.use == "thematic_seeds").stats["communities"]
    titles = [c["title"] for c in thematic]
    assert titles and "Background (summaries of topics in the documents; not passages, do not cite):" in prompt
    background = prompt.split("Context:")[0]
    assert [t for t in titles if t in background] == titles  # the communities Tier 3 matched
    assert stage(with_themes, "synth").stats["community_summaries"] == len(titles)
    assert stage(with_themes, "synth").tokens["prompt"] > stage(plain, "synth").tokens["prompt"]
    assert with_themes.answer == plain.answer  # the fake reads only the passages


def test_synthesis_looks_communities_up_itself_without_a_thematic_tier(engine: GraphRoute, fake_openai: FakeOpenAI) -> None:
    r = engine.query(Q, route="route1s_sentence_llm",
                     overrides={"synth.community_summaries": 2, "synth.community_min_similarity": -1.0})
    assert stage(r, "synth").stats["community_summaries"] == 2
    assert "Background (summaries" in fake_openai.requests[-1].body["messages"][-1]["content"]


def _by_prompt(requests: list[Any], pattern: str) -> int:
    import re

    return sum(1 for q in requests if re.search(pattern, q.body["messages"][0]["content"]))


def test_every_llm_stage_of_a_route_has_its_own_tokens_and_cost(engine: GraphRoute, fake_openai: FakeOpenAI) -> None:
    """route5_unified_llm with the LLM classifier: three stages call the model, each entry
    holds exactly the usage of its own calls, and together they are what the server billed."""
    r = engine.query(Q, route="route5_unified_llm", overrides={"weight_profile.classifier": "llm"})
    used = {t.stage: t for t in r.trace if t.tokens}
    assert set(used) == {"weight_profile", "ner_seeds", "synth"}
    served = {"prompt": 0, "completion": 0}
    for q in fake_openai.requests:  # the fake counts words; recompute what it billed
        words = sum(len(fake_model._WORD.findall(str(m["content"]))) for m in q.body["messages"])
        served["prompt"] += words
    assert sum(t.tokens["prompt"] for t in used.values()) == served["prompt"]
    for t in used.values():
        assert t.stats["llm_calls"] == 1
        assert t.stats["cost_usd"] == pytest.approx(price(t.tokens["prompt"], t.tokens["completion"]), abs=1e-6)
    assert _by_prompt(fake_openai.requests, fake_model.SYNTHESIS) == 1
