"""The whole LLM path on one index: entities and triples from llm_openie, community summaries
from the LLM, then route2_local_llm (LLM names, LLM answer) on that graph; every model call
goes through the openai SDK to the loopback server, and the index report counts what the
calls cost."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from graphroute.core.api.models import Label
from graphroute.core.config.settings import Settings
from graphroute.core.engine import GraphRoute

from tests.llm.conftest import client_params
from tests.servers import fake_model
from tests.servers.fake_apis import FakeOpenAI, Reply

PROFILE = """\
name: llm-index-test
segmenter: {use: spacy}
embedder: {use: local}
steps:
  - use: entity_graph
    with: {extractor: llm_openie, extractor_params: {concurrency: 2}}
  - use: communities
    with: {summarizer: llm, min_size: 2}
"""


def test_llm_openie_and_summaries_then_an_llm_route(
    corpus_dir: Path, fake_openai: FakeOpenAI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, llm_env: None
) -> None:
    fake_model.install(fake_openai)
    monkeypatch.setenv("GRAPHROUTE_LLM", "openai")
    monkeypatch.setenv("GRAPHROUTE_LLM_PARAMS", json.dumps(client_params(fake_openai, tmp_path)))
    (tmp_path / "profile.yaml").write_text(PROFILE, encoding="utf-8")
    fake_openai.script = [Reply(status=429, headers={"retry-after-ms": "5"})]  # the first request is retried
    g = GraphRoute(settings=Settings(store=str(tmp_path / "store"), group="openie", cache_dir=tmp_path / "cache"))
    try:
        report = g.index([corpus_dir / "corpus.json"], profile=str(tmp_path / "profile.yaml")).to_json()
        assert not report["failed"]
        openie = fake_openai.chat_count(fake_model.OPENIE)
        assert openie == 8 + 1  # one per passage, plus the retried 429
        extraction = report["steps"]["entity_graph"]["extraction"]
        assert extraction["llm_calls_ok"] == 8 and extraction["prompt_tokens"] > 0
        assert extraction["cost_micro_usd"] > 0
        # the fake's entities and triples made the graph
        names = {str(n.props["name"]) for n in g.store.iter_nodes("openie", Label.ENTITY)}
        assert {"Johannes Hevelius", "Danzig", "Lake Baikal"} <= names
        summaries = report["steps"]["communities"]["summaries"]
        comms = list(g.store.iter_nodes("openie", Label.COMMUNITY))
        assert comms and summaries["llm"] == len(comms) == fake_openai.chat_count(fake_model.SUMMARY)
        assert summaries["llm_prompt_tokens"] > 0 and summaries["llm_cost_usd"] > 0
        assert all(c.props["summary"].startswith("Passages about ") for c in comms)

        fake_openai.requests.clear()
        r = g.query("Which element has the symbol Hg?", route="route2_local_llm")
        ner = next(t for t in r.trace if t.stage == "ner_seeds")
        assert ner.stats["mode"] == "llm" and ner.stats["names"] == ["Hg"]
        hints = fake_openai.requests[0].body["messages"][-1]["content"]
        assert "Passages about " in hints  # the LLM-written summaries reach the NER prompt
        assert "Mercury is a chemical element" in r.answer and r.citations
    finally:
        g.close()
