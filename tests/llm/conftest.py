"""The LLM path end to end: a small corpus indexed once with the offline default profile
(entities and communities included), loopback OpenAI and Voyage servers spoken to by the real
SDKs, and engines whose process LLM (``GRAPHROUTE_LLM``) points at the loopback server."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from graphroute.core.api.models import Label
from graphroute.core.config.settings import Settings
from graphroute.core.engine import GraphRoute

from tests.bench.conftest import PASSAGES, QUESTIONS
from tests.servers.fake_apis import FakeOpenAI, fake_openai, fake_voyage

__all__ = ["PASSAGES", "QUESTIONS", "fake_openai", "fake_voyage"]

OPENAI_KEY = "sk-test-SECRET-llm-0123456789"
GROUP = "llm"


@pytest.fixture(scope="session")
def corpus_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("llm-corpus")
    (d / "corpus.json").write_text(json.dumps(PASSAGES), encoding="utf-8")
    (d / "questions.json").write_text(json.dumps(QUESTIONS), encoding="utf-8")
    return d


@pytest.fixture(scope="session")
def indexed(corpus_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[GraphRoute]:
    """The corpus in an embedded store, default profile (spaCy entities, Leiden communities
    with extractive summaries), offline."""
    root = tmp_path_factory.mktemp("llm-store")
    settings = Settings(store=str(root / "store"), group=GROUP, cache_dir=root / "cache")
    g = GraphRoute(settings=settings)
    g.index([corpus_dir / "corpus.json"])
    assert any(True for _ in g.store.iter_nodes(GROUP, Label.COMMUNITY)), "the corpus should make communities"
    yield g
    g.close()


@pytest.fixture()
def llm_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    """A clean LLM environment: a key, no process LLM, a private reply cache."""
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
    monkeypatch.setenv("GRAPHROUTE_CACHE", str(tmp_path / "cache"))
    for name in ("GRAPHROUTE_LLM", "GRAPHROUTE_LLM_PARAMS", "GRAPHROUTE_LLM_MODEL", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    yield


def client_params(server: FakeOpenAI, tmp_path: Path, **kw: Any) -> dict[str, Any]:
    """Parameters of the `openai` client for the loopback server: fast retries, a short
    timeout, a reply cache private to the test."""
    params: dict[str, Any] = {
        "base_url": server.url + "/v1", "model": "gpt-4.1-mini", "timeout": 2.0, "max_retries": 2,
        "backoff_s": 0.01, "max_backoff_s": 0.05, "cache_dir": str(tmp_path / "llm-replies"),
    }
    params.update(kw)
    return params


def llm_engine(
    indexed: GraphRoute, server: FakeOpenAI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, **kw: Any
) -> GraphRoute:
    """A fresh engine on the shared store whose process LLM is the loopback server."""
    monkeypatch.setenv("GRAPHROUTE_LLM", "openai")
    monkeypatch.setenv("GRAPHROUTE_LLM_PARAMS", json.dumps(client_params(server, tmp_path, **kw)))
    return GraphRoute(indexed.store, GROUP, settings=indexed.settings)
