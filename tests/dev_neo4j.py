"""Where the tests find the project's Neo4j: $NEO4J_URI, else (unset or empty) the port
``make neo4j-up`` starts it on ($NEO4J_PORT, 7687 when unset); and the mark of a test that
needs it running."""

from __future__ import annotations

import os
import socket

import pytest

NEO4J_URI = os.environ.get("NEO4J_URI") or f"bolt://127.0.0.1:{os.environ.get('NEO4J_PORT') or '7687'}"


def server_address() -> tuple[str, int]:
    """The host and port of :data:`NEO4J_URI`."""
    host, port = NEO4J_URI.split("://", 1)[1].rsplit(":", 1)
    return host, int(port)


def server_up() -> bool:
    """True when something answers on the server's port."""
    try:
        with socket.create_connection(server_address(), timeout=2):
            return True
    except OSError:
        return False


# skipped where no server runs, except in CI, where these tests must run
needs_server = pytest.mark.skipif(
    os.environ.get("CI") != "true" and not server_up(),
    reason="Neo4j not reachable; run `make neo4j-up` (in CI these tests must run)",
)
