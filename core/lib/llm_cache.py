"""On-disk cache of LLM responses, keyed by model + prompt hash.

Why: benchmark reruns must be reproducible and free. Every LLM-backed stage (synthesis,
query NER, OpenIE, community summaries) goes through the same client, and the client looks
here first. The key covers everything that changes the answer: the model, the messages, the
JSON mode, the temperature and the token limit, plus the endpoint (two servers serving "the
same" model name are different models). Nothing secret is part of the key or the entry.

Entries are one small JSON file each, written atomically (temp file + rename), so parallel
processes sharing the cache never read half an entry.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from graphroute.core.api.components import LLMResponse


def prompt_key(
    model: str,
    messages: list[dict[str, str]],
    *,
    json_mode: bool = False,
    temperature: float = 0.0,
    max_tokens: int | None = None,
    endpoint: str = "",
) -> str:
    """The cache key: sha256 of a canonical JSON of everything that shapes the reply."""
    payload = {
        "model": model,
        "endpoint": endpoint,
        "messages": messages,
        "json_mode": json_mode,
        "temperature": temperature,
        "max_tokens": max_tokens,
    }
    blob = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


@dataclass
class LLMCache:
    """A directory of cached replies: ``<root>/<key[:2]>/<key>.json``."""

    root: Path

    @classmethod
    def default(cls) -> LLMCache:
        """The machine-wide cache under the settings' cache dir (``GRAPHROUTE_CACHE``)."""
        from graphroute.core.lib.paths import default_cache_dir

        return cls(default_cache_dir() / "llm")

    def _path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str) -> LLMResponse | None:
        """The cached reply, marked ``cached`` and with zero cost (no money was spent);
        token counts are the original call's, so context sizes stay comparable."""
        path = self._path(key)
        try:
            data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        if not isinstance(data.get("text"), str):
            return None
        return LLMResponse(
            text=data["text"],
            prompt_tokens=int(data.get("prompt_tokens", 0)),
            completion_tokens=int(data.get("completion_tokens", 0)),
            cost_usd=0.0,
            cached=True,
        )

    def put(self, key: str, response: LLMResponse, *, model: str = "") -> None:
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        entry = {
            "model": model,
            "text": response.text,
            "prompt_tokens": response.prompt_tokens,
            "completion_tokens": response.completion_tokens,
            "cost_usd": response.cost_usd,
        }
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".json")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump(entry, fh, ensure_ascii=False)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def __len__(self) -> int:
        return sum(1 for _ in self.root.glob("*/*.json")) if self.root.exists() else 0
