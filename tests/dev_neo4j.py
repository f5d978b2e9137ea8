"""Where the tests find the project's Neo4j: $NEO4J_URI, else (unset or empty) the port
``make neo4j-up`` starts it on ($NEO4J_PORT, 7687 when unset)."""

from __future__ import annotations

import os

NEO4J_URI = os.environ.get("NEO4J_URI") or f"bolt://127.0.0.1:{os.environ.get('NEO4J_PORT') or '7687'}"
