"""Loopback API servers and a private LLM cache for the services tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.servers.fake_apis import fake_openai, fake_voyage

__all__ = ["fake_openai", "fake_voyage"]

OPENAI_KEY = "sk-test-SECRET-0123456789abcdef"
VOYAGE_KEY = "pa-test-SECRET-fedcba9876543210"


@pytest.fixture()
def api_keys(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[dict[str, str]]:
    """Keys in the environment only (as in production) and a fresh cache directory."""
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
    monkeypatch.setenv("VOYAGE_API_KEY", VOYAGE_KEY)
    monkeypatch.setenv("GRAPHROUTE_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("GRAPHROUTE_LLM", raising=False)
    monkeypatch.delenv("GRAPHROUTE_LLM_PARAMS", raising=False)
    yield {"openai": OPENAI_KEY, "voyage": VOYAGE_KEY}
