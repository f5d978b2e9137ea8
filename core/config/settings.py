"""Process settings read from the environment (and flags that override them).

Secrets (API keys) are only ever read here, from the environment, and are never printed:
``Settings.__repr__`` masks them and ``public()`` leaves them out.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from graphroute.core.errors import ConfigError
from graphroute.core.lib.paths import default_cache_dir

DEFAULT_STORE = ".graphroute"
DEFAULT_GROUP = "default"
# The longest question any entry point accepts (CLI, Python API, HTTP): a question, not a
# document. Every stage's work is linear in the question, and this bounds that work.
DEFAULT_MAX_QUESTION_CHARS = 4_000
MAX_QUESTION_ENV = "GRAPHROUTE_MAX_QUESTION_CHARS"
# The store backends' parameters, a JSON object keyed by backend name, e.g.
# '{"neo4j": {"exact_max": 5000}}': each backend takes its own, so one setting serves a
# shell that opens both an embedded and a Neo4j store.
STORE_PARAMS_ENV = "GRAPHROUTE_STORE_PARAMS"


def _env_int(name: str, default: int) -> int:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value < 1:
        raise ConfigError(f"{name} must be a whole number of at least 1, not {raw[:40]!r}")
    return value


def env_json(name: str, environ: Mapping[str, str] | None = None, error: type[ConfigError] = ConfigError) -> Any:
    """The JSON value of the environment variable ``name``, None when it is unset or blank;
    text that is not JSON is an ``error`` saying where it breaks."""
    raw = (os.environ if environ is None else environ).get(name, "").strip()
    if not raw:
        return None
    try:
        return json.loads(raw)
    except json.JSONDecodeError as exc:
        raise error(f"{name} is not valid JSON ({exc.msg} at char {exc.pos})") from None


def _env_store_params() -> dict[str, dict[str, Any]]:
    value = env_json(STORE_PARAMS_ENV)
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(isinstance(v, dict) for v in value.values()):
        raise ConfigError(
            f"{STORE_PARAMS_ENV} must be a JSON object of objects keyed by store backend, "
            'e.g. \'{"neo4j": {"exact_max": 5000}}\''
        )
    return value


@dataclass
class Settings:
    store: str = field(default_factory=lambda: os.environ.get("GRAPHROUTE_STORE", DEFAULT_STORE))
    group: str = field(default_factory=lambda: os.environ.get("GRAPHROUTE_GROUP", DEFAULT_GROUP))
    cache_dir: Path = field(default_factory=default_cache_dir)
    neo4j_user: str = field(default_factory=lambda: os.environ.get("NEO4J_USER", "neo4j"))
    neo4j_password: str = field(default_factory=lambda: os.environ.get("NEO4J_PASSWORD", ""), repr=False)
    openai_api_key: str = field(default_factory=lambda: os.environ.get("OPENAI_API_KEY", ""), repr=False)
    openai_base_url: str = field(default_factory=lambda: os.environ.get("OPENAI_BASE_URL", ""))
    voyage_api_key: str = field(default_factory=lambda: os.environ.get("VOYAGE_API_KEY", ""), repr=False)
    max_question_chars: int = field(default_factory=lambda: _env_int(MAX_QUESTION_ENV, DEFAULT_MAX_QUESTION_CHARS))
    # per store backend (by name), the parameters it opens a store with: GRAPHROUTE_STORE_PARAMS
    store_params: dict[str, dict[str, Any]] = field(default_factory=_env_store_params)

    def public(self) -> dict[str, str]:
        """Settings safe to print or log."""
        return {
            "store": self.store,
            "group": self.group,
            "cache_dir": str(self.cache_dir),
            "openai_base_url": self.openai_base_url,
            "openai_api_key": "set" if self.openai_api_key else "unset",
            "voyage_api_key": "set" if self.voyage_api_key else "unset",
        }
