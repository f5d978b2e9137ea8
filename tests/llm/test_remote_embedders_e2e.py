"""Index -> query with remote embedders through their real SDKs against the loopback servers:
Voyage (voyageai SDK, contextualized voyage-context-3) on the full default pipeline, and
Azure OpenAI for the embeddings of the index and the chat of an LLM route."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from graphroute.core.api.models import Label
from graphroute.core.config.settings import Settings
from graphroute.core.engine import GraphRoute

from tests.servers import fake_model
from tests.servers.fake_apis import FakeOpenAI, FakeVoyage

VOYAGE_KEY = "pa-test-SECRET-voyage-42"
AZURE_KEY = "azure-test-SECRET-key-42"
HG = "Which element has the symbol Hg?"

DEFAULT_STEPS = """\
steps:
  - use: sentence_knn
    with: {threshold: 0.90, k: 2}
  - use: section_similarity
    with: {threshold: 0.43, max_edges: 5}
  - use: entity_graph
    with: {extractor: spacy}
  - use: entity_knn
    with: {threshold: 0.60, k: 5}
  - use: hub_entities
  - use: communities
"""


def _engine(tmp_path: Path, corpus: Path, profile: str, group: str) -> tuple[GraphRoute, dict[str, object]]:
    (tmp_path / "profile.yaml").write_text(profile, encoding="utf-8")
    g = GraphRoute(settings=Settings(store=str(tmp_path / "store"), group=group, cache_dir=tmp_path / "cache"))
    report = g.index([corpus], profile=str(tmp_path / "profile.yaml"))
    data = report.to_json() if hasattr(report, "to_json") else dict(report)
    assert not data.get("failed"), data
    return g, data


def test_voyage_index_then_query(
    corpus_dir: Path, fake_voyage: FakeVoyage, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VOYAGE_API_KEY", VOYAGE_KEY)
    monkeypatch.delenv("GRAPHROUTE_LLM", raising=False)
    profile = (
        "name: voyage-test\nsegmenter: {use: spacy}\n"
        f"embedder: {{use: voyage, with: {{model: voyage-context-3, output_dimension: 256, "
        f'base_url: "{fake_voyage.url}/v1", max_retries: 1, backoff_s: 0.01}}}}\n' + DEFAULT_STEPS
    )
    g, _ = _engine(tmp_path, corpus_dir / "corpus.json", profile, "voyage")
    try:
        indexing = list(fake_voyage.requests)
        assert indexing and all(r.headers["authorization"] == f"Bearer {VOYAGE_KEY}" for r in indexing)
        contextual = [r for r in indexing if r.path == "/v1/contextualizedembeddings"]
        assert contextual and all(r.body["output_dimension"] == 256 and r.body["input_type"] == "document" for r in contextual)
        # every vector space of the group is Voyage's (sentences, chunks, entities, communities)
        vectors = g.store.counts("voyage")["vectors"]
        assert {"sentence", "chunk", "entity", "community"} <= {k for k, v in vectors.items() if v}
        assert any(True for _ in g.store.iter_nodes("voyage", Label.COMMUNITY))

        fake_voyage.requests.clear()
        for route in ("route1s_sentence", "route5_unified"):
            r = g.query(HG, route=route)
            assert r.evidence[0].document == "Mercury" and "symbol Hg" in r.evidence[0].text, route
            assert "Mercury is a chemical element" in r.answer and r.citations, route
        queries = [r for r in fake_voyage.requests if r.body.get("input_type") == "query"]
        assert queries and all(r.body["model"] == "voyage-context-3" for r in queries)
        assert VOYAGE_KEY not in json.dumps(r.to_public_json())
    finally:
        g.close()


def test_azure_openai_embeddings_and_chat(
    corpus_dir: Path, fake_openai: FakeOpenAI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Azure for both: the index is embedded by an Azure embeddings deployment, the answer
    comes from an Azure chat deployment; both with Azure's paths, api-version and api-key."""
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", AZURE_KEY)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    fake_model.install(fake_openai)
    azure = {"base_url": fake_openai.url, "api_version": "2024-10-21", "api_key_env": "AZURE_OPENAI_API_KEY",
             "max_retries": 1, "backoff_s": 0.01}
    embedder = {**azure, "deployment": "emb-small", "model": "text-embedding-3-small", "dimensions": 256}
    profile = (
        "name: azure-test\nsegmenter: {use: spacy}\n"
        f"embedder: {{use: openai, with: {json.dumps(embedder)}}}\n"
        "steps:\n  - use: sentence_knn\n    with: {threshold: 0.90, k: 2}\n"
    )
    g, _ = _engine(tmp_path, corpus_dir / "corpus.json", profile, "azure")
    try:
        emb = [r for r in fake_openai.requests if r.path.split("?")[0].endswith("/embeddings")]
        assert emb and {r.path for r in emb} == {"/openai/deployments/emb-small/embeddings?api-version=2024-10-21"}
        assert all(r.headers["api-key"] == AZURE_KEY and "authorization" not in r.headers for r in emb)
        assert all(r.body["dimensions"] == 256 for r in emb)

        chat = {**azure, "deployment": "chat-mini", "model": "gpt-4.1-mini", "cache_dir": str(tmp_path / "llm")}
        monkeypatch.setenv("GRAPHROUTE_LLM", "openai")
        monkeypatch.setenv("GRAPHROUTE_LLM_PARAMS", json.dumps(chat))
        fake_openai.requests.clear()
        q = GraphRoute(g.store, "azure", settings=g.settings)
        r = q.query(HG, route="route1s_sentence_llm")
        paths = [req.path for req in fake_openai.requests]
        assert paths == [
            "/openai/deployments/emb-small/embeddings?api-version=2024-10-21",  # the question
            "/openai/deployments/chat-mini/chat/completions?api-version=2024-10-21",
        ]
        assert all(req.headers["api-key"] == AZURE_KEY for req in fake_openai.requests)
        assert "Mercury is a chemical element" in r.answer and r.citations
        synth = next(t for t in r.trace if t.stage == "synth")
        assert "azure deployment chat-mini" in synth.stats["endpoint"] and synth.stats["cost_usd"] > 0
        assert AZURE_KEY not in json.dumps(r.to_public_json())
    finally:
        g.close()
