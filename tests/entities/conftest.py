"""Fixtures of this folder: the loopback OpenAI-compatible server (tests/servers)."""

from tests.servers.fake_apis import fake_openai

__all__ = ["fake_openai"]
