"""A route switched between the offline extractive synthesizer and a remote LLM by config
alone: a route YAML, CLI-style overrides (--enable/--disable/--set), or GRAPHROUTE_LLM.

Runs the real pipeline: a tiny document indexed into the embedded store with the packaged
embedding model and spaCy, chunk vector search, token_budget, then the synthesizer; the
LLM is the real openai SDK against the loopback server.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from graphroute.core.api.constants import NOT_FOUND
from graphroute.core.config.overrides import overrides_from_cli
from graphroute.core.engine import GraphRoute
from graphroute.core.errors import LLMNotConfiguredError

from tests.servers.fake_apis import FakeOpenAI

DOC = """# Rental Terms

## Fees

The agent fee is 15% of gross revenue for short stays. The fee is paid monthly.

## Parking

Parking in the garage is free on weekends. Visitors use the street.
"""

ROUTE = """
name: switchable
stages:
  - use: chunk_vector
    with: {{top_k: 3}}
  - use: token_budget
  - use: extractive
    id: offline
    enabled: {offline}
  - use: llm_synthesis
    id: synth
    enabled: {remote}
    with:
      llm: openai
      llm_params: {{base_url: "{url}/v1", model: gpt-4.1-mini, max_retries: 1, backoff_s: 0.01}}
"""


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GraphRoute]:
    root = tmp_path_factory.mktemp("switch")
    (root / "terms.md").write_text(DOC, encoding="utf-8")
    mp = pytest.MonkeyPatch()
    mp.setenv("GRAPHROUTE_CACHE", str(root / "cache"))
    g = GraphRoute(str(root / "store"), "switch")
    g.index([root / "terms.md"])
    yield g
    g.close()
    mp.undo()


def _responder(body: dict[str, Any]) -> str:
    """Answer like a disciplined model: the first context block's first sentence, cited."""
    user = body["messages"][-1]["content"]
    if "weather" in user.lower():
        return NOT_FOUND
    m = re.search(r"^\[1\] (.+?\.)", user, flags=re.M)
    return f"{m.group(1)} [1]" if m else NOT_FOUND


def _write_route(tmp_path: Path, url: str, *, offline: bool, remote: bool) -> str:
    path = tmp_path / "switchable.yaml"
    path.write_text(ROUTE.format(url=url, offline=str(offline).lower(), remote=str(remote).lower()))
    return str(path)


def test_yaml_and_overrides_switch_synthesizer(
    engine: GraphRoute, fake_openai: FakeOpenAI, api_keys: dict[str, str], tmp_path: Path
) -> None:
    fake_openai.responder = _responder
    route = _write_route(tmp_path, fake_openai.url, offline=True, remote=False)
    q = "What is the agent fee?"

    offline = engine.query(q, route=route)
    assert fake_openai.count() == 0  # offline: no network at all
    used = {t.stage: t.enabled for t in offline.trace}
    assert used["offline"] and not used["synth"]
    assert "15%" in offline.answer and not offline.negative

    # the same route switched to the remote LLM by overrides alone (as --disable/--enable/--set)
    ov = overrides_from_cli(sets=["synth.max_tokens=200"], disable=["offline"], enable=["synth"])
    remote = engine.query(q, route=route, overrides=ov)
    assert fake_openai.count("/chat/completions") == 1
    synth = next(t for t in remote.trace if t.stage == "synth")
    assert synth.enabled and synth.tokens["prompt"] > 0 and synth.tokens["completion"] > 0
    assert synth.stats["cost_usd"] > 0 and synth.stats["llm_cached"] is False
    assert remote.answer.endswith("[1]") and "15%" in remote.answer
    assert [c.index for c in remote.citations] == [1]
    assert remote.citations[0].evidence_id == remote.evidence[0].id
    body = fake_openai.requests[0].body
    assert body["max_tokens"] == 200
    assert "Question: What is the agent fee?" in body["messages"][-1]["content"]
    assert api_keys["openai"] not in str(remote.to_public_json())

    # rerun: answered from the cache, no new request, reproducible answer
    again = engine.query(q, route=route, overrides=ov)
    assert fake_openai.count("/chat/completions") == 1
    assert again.answer == remote.answer
    assert next(t for t in again.trace if t.stage == "synth").stats["llm_cached"] is True

    # the model saying "not found" becomes an explicit negative
    neg = engine.query("What will the weather be tomorrow?", route=route, overrides=ov)
    assert neg.negative and neg.answer == NOT_FOUND and neg.citations == []


def test_yaml_alone_selects_remote(engine: GraphRoute, fake_openai: FakeOpenAI, api_keys: dict[str, str], tmp_path: Path) -> None:
    fake_openai.responder = _responder
    route = _write_route(tmp_path, fake_openai.url, offline=False, remote=True)
    r = engine.query("Is parking free on weekends?", route=route)
    assert fake_openai.count("/chat/completions") == 1 and not r.negative and r.citations


def test_environment_selects_process_llm(
    engine: GraphRoute, fake_openai: FakeOpenAI, api_keys: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """llm_synthesis without `llm:` uses GRAPHROUTE_LLM; without it, it fails clearly or
    falls back to extractive when the route says so."""
    fake_openai.responder = _responder
    path = tmp_path / "env_route.yaml"
    path.write_text(
        "name: env_route\nstages:\n  - use: chunk_vector\n  - use: token_budget\n"
        "  - use: llm_synthesis\n    id: synth\n"
    )
    g = GraphRoute(engine.store, "switch")
    with pytest.raises(LLMNotConfiguredError, match="GRAPHROUTE_LLM"):
        g.query("What is the agent fee?", route=str(path))
    fb = g.query("What is the agent fee?", route=str(path), overrides={"synth.fallback": "extractive"})
    assert "15%" in fb.answer and next(t for t in fb.trace if t.stage == "synth").stats["fallback"] == "extractive"
    assert fake_openai.count() == 0

    monkeypatch.setenv("GRAPHROUTE_LLM", "openai")
    monkeypatch.setenv("GRAPHROUTE_LLM_PARAMS", f'{{"base_url": "{fake_openai.url}/v1", "model": "gpt-4o-mini"}}')
    g2 = GraphRoute(engine.store, "switch")
    r = g2.query("What is the agent fee?", route=str(path))
    assert fake_openai.count("/chat/completions") == 1
    assert fake_openai.requests[0].body["model"] == "gpt-4o-mini"
    assert "15%" in r.answer and r.citations
