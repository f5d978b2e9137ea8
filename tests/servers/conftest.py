"""Fixtures of the loopback API servers, for tests in this folder (other folders import
them from ``tests.servers.fake_apis``)."""

from tests.servers.fake_apis import fake_openai, fake_voyage

__all__ = ["fake_openai", "fake_voyage"]
