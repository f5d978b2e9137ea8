"""The `openai` LLM client with the real openai SDK against the loopback server."""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

import pytest
from graphroute.core.config.clients import llm_factory, llm_params_from_env
from graphroute.core.config.settings import Settings
from graphroute.core.errors import (
    LLMConfigError,
    LLMOutputError,
    QueryTimeoutError,
    RemoteCallError,
)
from graphroute.core.lib.deadline import deadline_in
from graphroute.core.lib.llm import complete_json
from graphroute.core.registry import get_registry
from graphroute.plugins.llm.openai_chat import OpenAIChat, cost_usd
from pydantic import BaseModel

from tests.servers.fake_apis import FakeOpenAI, Reply

MSG = [{"role": "user", "content": "What is the agent fee?"}]


def _client(server: FakeOpenAI, tmp_path: Path, **kw: Any) -> OpenAIChat:
    params: dict[str, Any] = {
        "base_url": server.url + "/v1", "model": "gpt-4.1-mini", "timeout": 2.0,
        "max_retries": 2, "backoff_s": 0.01, "cache_dir": str(tmp_path / "llm"),
    }
    params.update(kw)
    return OpenAIChat(OpenAIChat.Params(**params))


class Answer(BaseModel):
    entities: list[str]


def test_success_tokens_cost_and_key_sent(fake_openai: FakeOpenAI, api_keys: dict[str, str], tmp_path: Path) -> None:
    fake_openai.responder = lambda body: "The fee is 15% [1]."
    r = _client(fake_openai, tmp_path).complete(MSG, max_tokens=50)
    assert r.text == "The fee is 15% [1]."
    assert (r.prompt_tokens, r.completion_tokens) == (5, 5)
    assert r.cost_usd == pytest.approx(cost_usd("gpt-4.1-mini", OpenAIChat.Params().prices, 5, 5))
    assert r.cost_usd > 0 and not r.cached
    (req,) = fake_openai.requests
    assert req.path == "/v1/chat/completions"
    assert req.headers["authorization"] == f"Bearer {api_keys['openai']}"
    assert req.body["model"] == "gpt-4.1-mini" and req.body["max_tokens"] == 50
    assert "response_format" not in req.body


def test_price_prefix_match() -> None:
    prices = OpenAIChat.Params().prices
    assert cost_usd("gpt-4.1-mini-2025-04-14", prices, 1_000_000, 0) == pytest.approx(0.40)
    assert cost_usd("my-local-llama", prices, 1000, 1000) == 0.0


def test_cache_hit_on_rerun(fake_openai: FakeOpenAI, api_keys: dict[str, str], tmp_path: Path) -> None:
    c = _client(fake_openai, tmp_path)
    first = c.complete(MSG)
    second = _client(fake_openai, tmp_path).complete(MSG)  # a new process would see the same
    assert fake_openai.count("/chat/completions") == 1
    assert second.cached and second.text == first.text and second.cost_usd == 0.0
    assert second.prompt_tokens == first.prompt_tokens
    c.complete([{"role": "user", "content": "another question"}])
    assert fake_openai.count("/chat/completions") == 2
    nocache = _client(fake_openai, tmp_path, cache=False)
    nocache.complete(MSG)
    assert fake_openai.count("/chat/completions") == 3


def test_429_then_success(fake_openai: FakeOpenAI, api_keys: dict[str, str], tmp_path: Path) -> None:
    fake_openai.script = [Reply(status=429, headers={"retry-after-ms": "5"}), Reply()]
    c = _client(fake_openai, tmp_path)
    assert c.complete(MSG).text == "OK"
    assert fake_openai.count("/chat/completions") == 2 and c.retries == 1


def test_500_exhausts_retries(fake_openai: FakeOpenAI, api_keys: dict[str, str], tmp_path: Path) -> None:
    fake_openai.default = Reply(status=500)
    c = _client(fake_openai, tmp_path, max_retries=2)
    with pytest.raises(RemoteCallError) as err:
        c.complete(MSG)
    assert err.value.status == 500 and err.value.retries == 2
    assert "after 2 retries" in str(err.value) and "HTTP 500" in str(err.value)
    assert fake_openai.count("/chat/completions") == 3  # one call + two retries, then stop


def test_non_retryable_status_fails_at_once(fake_openai: FakeOpenAI, api_keys: dict[str, str], tmp_path: Path) -> None:
    fake_openai.script = [Reply(status=404)]
    with pytest.raises(RemoteCallError) as err:
        _client(fake_openai, tmp_path).complete(MSG)
    assert err.value.status == 404 and fake_openai.count("/chat/completions") == 1


def test_timeout_then_retry_and_timeout_exhausted(fake_openai: FakeOpenAI, api_keys: dict[str, str], tmp_path: Path) -> None:
    fake_openai.script = [Reply(delay=3.0), Reply()]
    c = _client(fake_openai, tmp_path, timeout=0.3, max_retries=1)
    assert c.complete(MSG).text == "OK" and c.retries == 1
    fake_openai.script = [Reply(delay=3.0)]
    with pytest.raises(RemoteCallError) as err:
        _client(fake_openai, tmp_path, timeout=0.3, max_retries=0).complete([{"role": "user", "content": "t"}])
    assert "Timeout" in str(err.value)


def test_json_mode_validates_and_repairs(fake_openai: FakeOpenAI, api_keys: dict[str, str], tmp_path: Path) -> None:
    fake_openai.script = [Reply(content='{"entities": ["Contoso", '), Reply(content='```json\n{"entities": ["Contoso"]}\n```')]
    c = _client(fake_openai, tmp_path)
    obj, usage = complete_json(c, MSG, Answer)
    assert obj.entities == ["Contoso"]
    assert fake_openai.count("/chat/completions") == 2
    assert fake_openai.requests[0].body["response_format"] == {"type": "json_object"}
    repair = fake_openai.requests[1].body["messages"]
    assert repair[-2]["role"] == "assistant" and "not valid JSON" in repair[-1]["content"]
    assert usage.prompt_tokens > 0 and not usage.cached


def test_json_mode_gives_up(fake_openai: FakeOpenAI, api_keys: dict[str, str], tmp_path: Path) -> None:
    fake_openai.default = Reply(content='{"names": 3}')
    with pytest.raises(LLMOutputError, match="Answer"):
        complete_json(_client(fake_openai, tmp_path), [{"role": "user", "content": "x"}], Answer)
    assert fake_openai.count("/chat/completions") == 2


def test_json_mode_off_for_servers_without_it(fake_openai: FakeOpenAI, api_keys: dict[str, str], tmp_path: Path) -> None:
    fake_openai.default = Reply(content='{"entities": []}')
    complete_json(_client(fake_openai, tmp_path, json_mode=False), MSG, Answer)
    assert "response_format" not in fake_openai.requests[0].body


def test_azure_deployment_path_and_header(fake_openai: FakeOpenAI, api_keys: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", "azure-SECRET-key")
    c = _client(
        fake_openai, tmp_path, base_url=fake_openai.url, api_version="2024-10-21",
        deployment="gpt41mini", api_key_env="AZURE_OPENAI_API_KEY",
    )
    assert c.complete(MSG).text == "OK"
    (req,) = fake_openai.requests
    assert req.path == "/openai/deployments/gpt41mini/chat/completions?api-version=2024-10-21"
    assert req.headers["api-key"] == "azure-SECRET-key"


def test_missing_key_is_a_clear_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    c = OpenAIChat(OpenAIChat.Params(cache=False))
    with pytest.raises(LLMConfigError, match="OPENAI_API_KEY"):
        c.complete(MSG)


def test_local_server_needs_no_key(fake_openai: FakeOpenAI, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assert _client(fake_openai, tmp_path, model="qwen2.5-7b-instruct").complete(MSG).cost_usd == 0.0


def test_key_never_in_logs_repr_or_errors(
    fake_openai: FakeOpenAI, api_keys: dict[str, str], tmp_path: Path, caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    caplog.set_level(logging.DEBUG)  # every logger, incl. openai / httpx internals
    key = api_keys["openai"]
    fake_openai.script = [Reply(status=429, headers={"retry-after-ms": "1"}), Reply()]
    c = _client(fake_openai, tmp_path)
    c.complete(MSG)
    fake_openai.default = Reply(status=500)
    with pytest.raises(RemoteCallError) as err:
        _client(fake_openai, tmp_path, max_retries=1).complete([{"role": "user", "content": "boom"}])
    out = capsys.readouterr()
    texts = [caplog.text, repr(c), str(c.params), repr(c.params), c.params.model_dump_json(), str(err.value),
             repr(err.value), out.out, out.err, repr(Settings())]
    assert any("retry" in t.lower() for t in texts)  # the logs were really captured
    for t in texts:
        assert key not in t
        assert key[-8:] not in t


def test_factory_from_environment(fake_openai: FakeOpenAI, api_keys: dict[str, str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    make = llm_factory(Settings(), get_registry())
    assert make() is None  # offline by default
    monkeypatch.setenv("GRAPHROUTE_LLM", "openai")
    monkeypatch.setenv("GRAPHROUTE_LLM_PARAMS", f'{{"base_url": "{fake_openai.url}/v1", "max_retries": 1}}')
    monkeypatch.setenv("GRAPHROUTE_LLM_MODEL", "gpt-4o-mini")
    llm = make()
    assert isinstance(llm, OpenAIChat)
    assert llm.params.model == "gpt-4o-mini" and llm.params.max_retries == 1
    assert llm.complete(MSG).text == "OK"
    monkeypatch.setenv("GRAPHROUTE_LLM_PARAMS", "{model: x")
    with pytest.raises(LLMConfigError, match="not valid JSON"):
        make()
    monkeypatch.setenv("GRAPHROUTE_LLM_PARAMS", '{"api_key": "sk-inline"}')
    with pytest.raises(LLMConfigError, match="api_key_env"):
        make()
    assert llm_params_from_env({"GRAPHROUTE_LLM": "off"}) == (None, {})


def test_stage_clients_keep_the_most_recently_used(
    fake_openai: FakeOpenAI, api_keys: dict[str, str], tmp_path: Path
) -> None:
    """A stage's own client is built once per configuration and reused; a caller that varies
    the params per call keeps at most STAGE_CLIENTS_MAX of them, the least recently used
    going first, and a client still held by its caller goes on answering."""
    from graphroute.core.engine import open_store
    from graphroute.core.query import services as svc

    fake_openai.responder = lambda body: f"answer from {body['model']}"
    services = svc.Services(open_store(str(tmp_path / "store")), "g")
    url = fake_openai.url + "/v1"

    def client(i: int) -> Any:
        return services.stage_llm("openai", {"base_url": url, "model": f"m{i}", "max_retries": 0})

    first, kept = client(0), client(1)
    assert client(0) is first  # the same configuration: the same client
    for i in range(2, svc.STAGE_CLIENTS_MAX + 5):
        client(i)
        client(1)  # used between every other: never the least recent
    assert len(svc._stage_clients) <= svc.STAGE_CLIENTS_MAX
    assert client(1) is kept
    assert client(0) is not first  # evicted, so built anew
    assert first.complete(MSG, max_tokens=5).text == "answer from m0"


def test_a_call_within_a_query_deadline_ends_with_it(fake_openai: FakeOpenAI, api_keys: dict[str, str], tmp_path: Path) -> None:
    """A slow endpoint does not hold the query's thread past the query's time limit: the
    request's timeout is what is left of it, not the client's own 30 s, and no retry
    starts once it is spent (the call is the query's timeout, a 504 in the server)."""
    fake_openai.script = [Reply(delay=3.0), Reply()]
    c = _client(fake_openai, tmp_path, timeout=30.0, max_retries=3)
    start = time.monotonic()
    with deadline_in(0.5), pytest.raises(QueryTimeoutError):
        c.complete(MSG)
    assert time.monotonic() - start < 2.5  # the slow reply takes 3 s
    assert len(fake_openai.requests) == 1


def test_no_retry_starts_that_the_query_deadline_would_cut_short(
    fake_openai: FakeOpenAI, api_keys: dict[str, str], tmp_path: Path
) -> None:
    """A 429 asking for a 5 s wait, with 1 s of the query left: the call ends at once as the
    query's timeout instead of sleeping into it."""
    fake_openai.script = [Reply(status=429, headers={"retry-after": "5"}), Reply()]
    c = _client(fake_openai, tmp_path, max_retries=3, max_backoff_s=8.0)
    start = time.monotonic()
    with deadline_in(1.0), pytest.raises(QueryTimeoutError):
        c.complete(MSG)
    assert time.monotonic() - start < 1.0
    assert len(fake_openai.requests) == 1
