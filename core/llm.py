"""Which LLM client a process uses, decided from settings.

Routes stay offline unless an LLM is configured: ``GRAPHROUTE_LLM`` names a registered LLM
client (``openai`` for any OpenAI-compatible server) and its settings come from the
environment (``OPENAI_API_KEY``, ``OPENAI_BASE_URL``, ``GRAPHROUTE_LLM_MODEL``). Stages that
can use an LLM (ner_seeds, llm_synthesis, ...) ask ``ctx.services.llm()`` and fall back to
their offline behaviour when it returns None.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable

from .components import LLMClient
from .registry import Registry
from .settings import Settings


def llm_factory(settings: Settings, registry: Registry) -> Callable[[], LLMClient | None]:
    """A zero-argument factory, called lazily on first use."""

    def make() -> LLMClient | None:
        name = os.environ.get("GRAPHROUTE_LLM", "").strip()
        if not name or name in ("none", "off"):
            return None
        cls = registry.llm_clients.get(name)
        params = json.loads(os.environ.get("GRAPHROUTE_LLM_PARAMS", "{}") or "{}")
        return cls(cls.Params(**params))

    return make
