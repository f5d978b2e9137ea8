"""The ``openai`` LLM client: chat completions against any OpenAI-compatible server.

One client serves OpenAI, Azure OpenAI (set ``api_version`` and ``deployment``), vLLM and
llama.cpp (set ``base_url``). Why the care around it:

* **Keys**: only the *name* of the environment variable is a parameter (``api_key_env``);
  the value is read when the client is built, kept in a private attribute, and never appears
  in a repr, a log line, an error message, the trace or the cache.
* **Retries**: the SDK's own retry is switched off and :func:`call_with_retries` does bounded
  exponential backoff on 429 / 5xx / timeouts / connection errors, so every remote service
  in graphroute behaves (and is tested) the same way.
* **Cost**: token usage comes from the server's ``usage`` block; cost is computed from a
  small price table (a parameter, USD per million tokens) and returned in the response.
* **Cache**: replies are cached on disk by model + prompt hash (:mod:`graphroute.core.lib.llm_cache`)
  so benchmark reruns are reproducible and free.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

from graphroute.core.api.components import ComponentParams, LLMClient, LLMResponse
from graphroute.core.errors import LLMConfigError
from graphroute.core.hookspecs import hookimpl
from graphroute.core.lib.deadline import capped
from graphroute.core.lib.llm import RetryPolicy, call_with_retries, retry_after_from_headers
from graphroute.core.lib.llm_cache import LLMCache, prompt_key
from pydantic import BaseModel, Field

OPENAI_DEFAULT_URL = "https://api.openai.com/v1"
NO_KEY_PLACEHOLDER = "no-key"  # local servers (vLLM, llama.cpp) ignore the key; the SDK needs one


class Price(BaseModel):
    """USD per million tokens."""

    input: float = Field(0.0, ge=0.0)
    output: float = Field(0.0, ge=0.0)


# List prices (USD / 1M tokens) at the time of writing; override with the `prices` param.
DEFAULT_PRICES: dict[str, Price] = {
    "gpt-4.1": Price(input=2.00, output=8.00),
    "gpt-4.1-mini": Price(input=0.40, output=1.60),
    "gpt-4.1-nano": Price(input=0.10, output=0.40),
    "gpt-4o": Price(input=2.50, output=10.00),
    "gpt-4o-mini": Price(input=0.15, output=0.60),
    "gpt-5": Price(input=1.25, output=10.00),
    "gpt-5-mini": Price(input=0.25, output=2.00),
    "gpt-5.1": Price(input=1.25, output=10.00),
    "text-embedding-3-small": Price(input=0.02),
    "text-embedding-3-large": Price(input=0.13),
}


def price_for(model: str, prices: dict[str, Price]) -> Price | None:
    """Exact match first, then the longest table entry the model name starts with
    (``gpt-4.1-mini-2025-04-14`` -> ``gpt-4.1-mini``)."""
    if model in prices:
        return prices[model]
    for name in sorted(prices, key=len, reverse=True):
        if model.startswith(name):
            return prices[name]
    return None


def cost_usd(model: str, prices: dict[str, Price], prompt_tokens: int, completion_tokens: int) -> float:
    p = price_for(model, prices)
    if p is None:
        return 0.0
    return (prompt_tokens * p.input + completion_tokens * p.output) / 1_000_000


def classify_openai_error(exc: BaseException) -> tuple[bool, float | None, int | None]:
    """(retryable, retry_after, status) for exceptions of the openai SDK."""
    import openai

    if isinstance(exc, openai.APITimeoutError | openai.APIConnectionError):
        return True, None, None
    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        retryable = status in (408, 409, 429) or status >= 500
        return retryable, retry_after_from_headers(exc.response.headers), status
    return False, None, None


def reply_text(completion: Any) -> tuple[str, str]:
    """(text, refusal) of a chat completion. The refusal is the message's ``refusal`` field
    (structured-output models), or ``content_filter`` when the provider stopped the reply."""
    if not completion.choices:
        return "", ""
    choice = completion.choices[0]
    text = choice.message.content or ""
    refusal = getattr(choice.message, "refusal", None) or ""
    if not refusal and choice.finish_reason == "content_filter":
        refusal = "content_filter"
    return text, refusal


class OpenAIConnection(ComponentParams):
    """Where and how to reach an OpenAI-compatible endpoint (shared by chat and embeddings)."""

    base_url: str | None = Field(
        None,
        description="Server URL, e.g. http://localhost:8000/v1 for vLLM; Azure: the resource "
        "endpoint https://NAME.openai.azure.com. Default: OPENAI_BASE_URL or api.openai.com.",
    )
    api_key_env: str = Field(
        "OPENAI_API_KEY",
        description="NAME of the environment variable holding the API key (the key itself is never a parameter).",
    )
    api_version: str | None = Field(None, description="Azure OpenAI only: API version, e.g. 2024-10-21.")
    deployment: str | None = Field(None, description="Azure OpenAI only: the deployment name.")
    timeout: float = Field(60.0, gt=0.0, le=3600.0, description="Seconds per request.")
    max_retries: int = Field(3, ge=0, le=10, description="Retries on 429 / 5xx / timeout, with backoff.")
    backoff_s: float = Field(0.5, ge=0.0, le=60.0, description="First backoff delay; doubles per retry.")
    max_backoff_s: float = Field(8.0, ge=0.0, le=300.0, description="Cap on one backoff delay (and on Retry-After).")


def openai_sdk_client(conn: OpenAIConnection) -> tuple[Any, str]:
    """The SDK client (retries off: ours apply) and a printable endpoint (no secrets)."""
    import openai

    key = os.environ.get(conn.api_key_env, "")
    base_url = conn.base_url or os.environ.get("OPENAI_BASE_URL") or None
    if conn.api_version or conn.deployment:
        if not base_url:
            raise LLMConfigError(
                "Azure OpenAI needs base_url (the resource endpoint, https://NAME.openai.azure.com)"
            )
        if not conn.api_version:
            raise LLMConfigError("Azure OpenAI needs api_version, e.g. 2024-10-21")
        if not key:
            raise LLMConfigError(f"Azure OpenAI needs an API key in the environment variable {conn.api_key_env}")
        client: Any = openai.AzureOpenAI(
            azure_endpoint=base_url,
            azure_deployment=conn.deployment,
            api_version=conn.api_version,
            api_key=key,
            timeout=conn.timeout,
            max_retries=0,
        )
        return client, f"{base_url.rstrip('/')} (azure deployment {conn.deployment})"
    if not key and not base_url:
        raise LLMConfigError(
            f"no API key: set the environment variable {conn.api_key_env} "
            "(or base_url for a local server that needs none)"
        )
    client = openai.OpenAI(
        api_key=key or NO_KEY_PLACEHOLDER,
        base_url=base_url,
        timeout=conn.timeout,
        max_retries=0,
    )
    return client, (base_url or OPENAI_DEFAULT_URL).rstrip("/")


class OpenAIChat(LLMClient):
    """Chat completions on any OpenAI-compatible server (OpenAI, Azure, vLLM, llama.cpp)."""

    name = "openai"

    class Params(OpenAIConnection):
        model: str = Field("gpt-4.1-mini", description="Model name (Azure: the deployment's model).")
        json_mode: bool = Field(
            True,
            description="Send response_format=json_object when a caller asks for JSON; turn off "
            "for servers that reject it (the prompt still asks for JSON).",
        )
        max_tokens_param: str = Field(
            "max_tokens",
            pattern="^(max_tokens|max_completion_tokens)$",
            description="Request field for the output limit (newer OpenAI reasoning models need max_completion_tokens).",
        )
        prices: dict[str, Price] = Field(
            default_factory=lambda: dict(DEFAULT_PRICES),
            description="USD per million input/output tokens by model name (prefix match).",
        )
        cache: bool = Field(True, description="Reuse replies from the on-disk cache (model + prompt hash).")
        cache_dir: str | None = Field(None, description="Cache directory (default: GRAPHROUTE_CACHE/llm).")

    params: Params

    def __init__(self, params: ComponentParams | None = None) -> None:
        super().__init__(params)
        self._client: Any = None
        self._endpoint = ""
        self._lock = threading.Lock()
        self._cache: LLMCache | None = None
        if self.params.cache:
            self._cache = LLMCache(Path(self.params.cache_dir).expanduser()) if self.params.cache_dir else LLMCache.default()
        self.calls = 0
        self.retries = 0
        self.cache_hits = 0

    def __repr__(self) -> str:
        return f"OpenAIChat(model={self.params.model!r}, endpoint={self.endpoint!r})"

    @property
    def endpoint(self) -> str:
        if not self._endpoint:
            base = self.params.base_url or os.environ.get("OPENAI_BASE_URL") or OPENAI_DEFAULT_URL
            self._endpoint = base.rstrip("/") + (f" (azure deployment {self.params.deployment})" if self.params.deployment else "")
        return self._endpoint

    def _sdk(self) -> Any:
        with self._lock:
            if self._client is None:
                self._client, self._endpoint = openai_sdk_client(self.params)
            return self._client

    def complete(
        self,
        messages: list[dict[str, str]],
        *,
        json_mode: bool = False,
        max_tokens: int | None = None,
        temperature: float = 0.0,
    ) -> LLMResponse:
        p = self.params
        key = prompt_key(
            p.model, messages, json_mode=json_mode, temperature=temperature,
            max_tokens=max_tokens, endpoint=self.endpoint,
        )
        if self._cache is not None:
            hit = self._cache.get(key)
            if hit is not None:
                self.cache_hits += 1
                return hit
        client = self._sdk()
        kwargs: dict[str, Any] = {"model": p.model, "messages": messages, "temperature": temperature}
        if max_tokens is not None:
            kwargs[p.max_tokens_param] = max_tokens
        if json_mode and p.json_mode:
            kwargs["response_format"] = {"type": "json_object"}
        policy = RetryPolicy(p.max_retries, p.backoff_s, p.max_backoff_s)
        completion, retries = call_with_retries(
            lambda: client.chat.completions.create(**kwargs, timeout=capped(p.timeout)),
            policy=policy,
            classify=classify_openai_error,
            what=f"openai chat ({p.model} at {self.endpoint})",
        )
        self.calls += 1
        self.retries += retries
        text, refusal = reply_text(completion)
        usage = completion.usage
        pt = int(usage.prompt_tokens) if usage else 0
        ct = int(usage.completion_tokens) if usage else 0
        resp = LLMResponse(
            text=text, prompt_tokens=pt, completion_tokens=ct,
            cost_usd=cost_usd(p.model, p.prices, pt, ct), cached=False, refusal=refusal,
        )
        # a refusal is not cached: it may be the provider's passing policy, not the prompt's
        if self._cache is not None and not refusal:
            self._cache.put(key, resp, model=p.model)
        return resp


@hookimpl
def register_llm_clients() -> list[type[LLMClient]]:
    return [OpenAIChat]
