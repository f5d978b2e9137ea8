"""Fixtures of this folder: the loopback OpenAI-compatible server (tests/servers)."""

from tests.servers.fake_apis import _openai_server, fake_openai

__all__ = ["_openai_server", "fake_openai"]
