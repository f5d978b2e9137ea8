"""Which LLM client a process uses, and the rules every remote model call follows.

**Choosing the client.** Routes stay offline unless an LLM is configured:
``GRAPHROUTE_LLM`` names a registered LLM client (``openai`` speaks to any OpenAI-compatible
server: OpenAI, Azure OpenAI, vLLM, llama.cpp) and ``GRAPHROUTE_LLM_PARAMS`` holds its
parameters as JSON, e.g. ``{"model": "gpt-4.1-mini", "base_url": "http://localhost:8000/v1"}``.
``GRAPHROUTE_LLM_MODEL`` is a shortcut for the ``model`` parameter, and on its own it selects
the ``openai`` client for that model. The API key is never a
parameter: the client reads the environment variable *named* by ``api_key_env``
(``OPENAI_API_KEY`` by default). Stages that can use an LLM (ner_seeds, llm_synthesis, ...)
take the :class:`LLMStageParams` (``llm``, ``llm_params``), ask
``ctx.services.stage_llm(llm, llm_params)`` and fall back to their offline behaviour when it
returns None.

**Every remote call** (chat, embeddings, rerank) goes through :func:`call_with_retries`:
bounded retries with exponential backoff on 429 / 5xx / timeouts / connection errors,
honouring ``Retry-After``; the final error names the endpoint and status, never the key.
Within a query's deadline no retry starts that the deadline would cut short, and a client
whose SDK takes a per-request timeout gives each attempt at most the query's remaining time
(:func:`~graphroute.core.lib.deadline.capped`).

**JSON output** from any LLM-backed stage goes through :func:`complete_json`: the reply is
validated by a pydantic model, and one repair round asks the model to fix invalid output; a
refusal is not repaired (:class:`~graphroute.core.errors.LLMRefusalError`).

**Accounting**: a stage records what its calls cost with :func:`record_usage`, so every
stage's trace entry carries its own tokens, cost, number of model replies and whether they
all came from the cache.
"""

from __future__ import annotations

import json
import logging
import random
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from graphroute.core.api.components import LLMClient, LLMResponse
from graphroute.core.api.stage import SERVER_SIDE, StageContext, StageParams
from graphroute.core.errors import LLMOutputError, LLMRefusalError, RemoteCallError
from graphroute.core.lib.deadline import check_deadline, remaining, timed_out
from pydantic import BaseModel, Field, ValidationError

log = logging.getLogger(__name__)

T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)




# --------------------------------------------------------------------------- retries


@dataclass(frozen=True)
class RetryPolicy:
    """Bounded retries with exponential backoff and jitter (and ``Retry-After`` honoured,
    up to ``max_backoff_s``)."""

    max_retries: int = 3
    backoff_s: float = 0.5
    max_backoff_s: float = 8.0

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        if retry_after is not None and retry_after >= 0:
            return min(retry_after, self.max_backoff_s)
        base = min(self.backoff_s * (2.0**attempt), self.max_backoff_s)
        return base * (1.0 - 0.25 * random.random())


Classifier = Callable[[BaseException], tuple[bool, float | None, int | None]]


def call_with_retries(
    fn: Callable[[], T],
    *,
    policy: RetryPolicy,
    classify: Classifier,
    what: str,
    sleep: Callable[[float], None] = time.sleep,
) -> tuple[T, int]:
    """Run ``fn``; on a retryable failure wait and retry, at most ``policy.max_retries`` times.

    ``classify(exc)`` returns ``(retryable, retry_after_seconds, status)``. Returns the
    result and how many retries were needed. Raises :class:`RemoteCallError` naming
    ``what`` (service and endpoint, no secrets) when the call cannot succeed.
    """
    attempt = 0
    while True:
        check_deadline(what)  # a query past its deadline makes no further calls
        try:
            return fn(), attempt
        except RemoteCallError:
            raise
        except Exception as exc:
            retryable, retry_after, status = classify(exc)
            if not retryable and status is None:
                raise  # not a remote failure (a bug, a config error): keep the original
            if not retryable or attempt >= policy.max_retries:
                tail = f" after {attempt} retr{'y' if attempt == 1 else 'ies'}" if retryable else ""
                code = f"HTTP {status}" if status is not None else type(exc).__name__
                raise RemoteCallError(
                    f"{what} failed{tail}: {code}: {_short(str(exc))}", status=status, retries=attempt
                ) from exc
            wait = policy.delay(attempt, retry_after)
            left = remaining()
            if left is not None and left <= wait:
                timed_out(what)  # the query's time runs out before the retry could start
            log.info("%s: %s, retry %d of %d in %.2fs", what, status or type(exc).__name__,
                     attempt + 1, policy.max_retries, wait)
            sleep(wait)
            attempt += 1


def _short(text: str, limit: int = 300) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def retry_after_from_headers(headers: object) -> float | None:
    """Seconds from ``retry-after-ms`` / ``retry-after`` headers, when present and numeric."""
    get = getattr(headers, "get", None)
    if get is None:
        return None
    for name, div in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        value = get(name)
        if value is None:
            continue
        try:
            return float(value) / div
        except (TypeError, ValueError):
            continue
    return None


# --------------------------------------------------------------------------- JSON output

_FENCE_RE = re.compile(r"^\s*```(?:json)?\s*(.*?)\s*```\s*$", re.S | re.I)


def parse_json_text(text: str) -> object:
    """Parse a model's JSON reply, tolerating a Markdown code fence or prose around one
    object/array. Raises ``ValueError`` when there is no JSON."""
    s = text.strip()
    m = _FENCE_RE.match(s)
    if m:
        s = m.group(1)
    try:
        return json.loads(s)
    except json.JSONDecodeError:
        pass
    for open_, close in (("{", "}"), ("[", "]")):
        i, j = s.find(open_), s.rfind(close)
        if 0 <= i < j:
            try:
                return json.loads(s[i : j + 1])
            except json.JSONDecodeError:
                continue
    raise ValueError("the reply contains no valid JSON")


def add_usage(total: LLMResponse, r: LLMResponse) -> None:
    """Add a reply's tokens, cost and calls to a running total (its text and refusal become
    the total's: the last reply's)."""
    total.prompt_tokens += r.prompt_tokens
    total.completion_tokens += r.completion_tokens
    total.cost_usd += r.cost_usd
    total.cached = total.cached and r.cached
    total.calls += r.calls
    total.text = r.text
    total.refusal = r.refusal


def complete_json(
    llm: LLMClient,
    messages: list[dict[str, str]],
    schema: type[M],
    *,
    max_tokens: int | None = None,
    repair_attempts: int = 1,
) -> tuple[M, LLMResponse]:
    """Ask for JSON and validate it against ``schema``.

    When the reply is not valid, the model is shown its reply and the error and asked once
    more (a different prompt, so a cached bad reply is not simply replayed). Returns the
    validated object and the summed usage of all calls (for :func:`record_usage`).
    Raises :class:`LLMRefusalError` when the model declines (no repair round: asking again
    would only be refused again) and :class:`LLMOutputError` when no attempt validates; both
    carry the usage of the attempts made (``usage``).
    """
    total = LLMResponse(text="", cached=True, calls=0)
    convo = list(messages)
    error = ""
    for _ in range(repair_attempts + 1):
        r = llm.complete(convo, json_mode=True, max_tokens=max_tokens)
        add_usage(total, r)
        if r.refusal:
            raise LLMRefusalError(f"the model declined: {_short(r.refusal, 200)}", usage=total)
        try:
            return schema.model_validate(parse_json_text(r.text)), total
        except (ValueError, ValidationError) as exc:
            error = _short(str(exc), 500)
        convo = [
            *messages,
            {"role": "assistant", "content": r.text},
            {
                "role": "user",
                "content": "Your reply was not valid JSON for the requested schema "
                f"({error}). Reply again with only the corrected JSON.",
            },
        ]
    raise LLMOutputError(f"model reply did not validate as {schema.__name__}: {error}", usage=total)


def record_usage(ctx: StageContext, resp: LLMResponse | None) -> None:
    """Put what a stage's model calls cost into its trace entry: ``tokens`` (prompt,
    completion), ``stats.cost_usd``, ``stats.llm_calls`` (model replies, cached or not) and
    ``stats.llm_cached`` (true while every reply came from the cache). Call it once per
    response, also for failed ones (``LLMOutputError.usage``): tokens spent on a reply the
    stage could not use were still spent."""
    if resp is None or not resp.calls:
        return
    ctx.add_tokens(resp.prompt_tokens, resp.completion_tokens, resp.cost_usd)
    ctx.stats["llm_calls"] = int(ctx.stats.get("llm_calls", 0)) + resp.calls
    ctx.stats["llm_cached"] = bool(ctx.stats.get("llm_cached", True)) and resp.cached


class LLMStageParams(StageParams):
    """Parameters every LLM-capable stage shares: which client it uses
    (``ctx.services.stage_llm(params.llm, params.llm_params)``)."""

    llm: str | None = Field(
        None,
        description="LLM client for this stage (e.g. openai); default: the process client "
        "from GRAPHROUTE_LLM. Not settable in an HTTP request's overrides.",
        json_schema_extra=SERVER_SIDE,
    )
    llm_params: dict[str, object] = Field(
        default_factory=dict,
        description="Parameters of that client (model, base_url, api_key_env, ...; never the key). "
        "Not settable in an HTTP request's overrides.",
        json_schema_extra=SERVER_SIDE,
    )
